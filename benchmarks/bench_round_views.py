"""The cost of a poll of ``GET /v1/runs/{run}/rounds`` at 10 and at 200 rounds.

Every role polls the rounds list (the tape witness every half second), so its cost is
paid per poll. The service keeps the list until the database's next write
(``ServiceState.memo``); this benchmark plays 200 rounds (``--rounds``) of two committing islands
(commit, audit selection, merge tape, settlement) on the service in process with a
hand-stepped beacon, and at 10 and at 200 rounds times the poll (CPU time of every
thread) two ways:

* ``fresh``: the list computed from the database, as every poll did before the memo
  (the memo is emptied before each call);
* ``kept``: a poll between two writes, as the roles' polls now are.

    .venv/bin/python benchmarks/bench_round_views.py [--rounds 200] [--calls 50]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from tests.challenge.helpers import (
    AGGREGATOR,
    SteppedBeacon,
    aggregator_split,
    bearer,
    commit_body,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)

from common import write_result
from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.state import ServiceState
from hypertrain.protocol.identity import Hotkey

RUN = "run-views"
KEYS = [Hotkey.from_seed(bytes([0x70 + i]) * 32) for i in range(2)]
AT = (10, 200)


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def _step(client: TestClient, beacon: SteppedBeacon, rounds: int) -> None:
    for _ in range(rounds):
        beacon.round += 1
        client.portal.call(_poll_beacon, client.app.state.service)  # type: ignore[attr-defined]


def _play_round(client: TestClient, beacon: SteppedBeacon, index: int) -> None:
    """Open round ``index``, both islands commit, the audit closes, a tape merges, it settles."""
    start = {"start_model_sha256": "aa" * 32, "start_model_url": "http://relay/m0"}
    r = client.post(f"/admin/v1/runs/{RUN}/rounds", headers=bearer("admin"), json=start)
    assert r.status_code == 200, r.text
    for key in KEYS:
        env = signed(key, "commit", commit_body(index, island=key.ss58_address), run_id=RUN)
        assert client.post("/v1/commit", json=env).status_code == 200
    _step(client, beacon, 4)  # commit close, selection, audit close
    tape = {
        "round": index, "start_model_sha256": "aa" * 32, "new_model_sha256": "bb" * 32,
        "new_model_url": "u", "outer_state_sha256": "cc" * 32, "tape_sha256": f"{index:064x}",
        **aggregator_split(client, RUN, index, [k.ss58_address for k in KEYS]),
    }  # fmt: skip
    env = signed(AGGREGATOR, "merge-tape", tape, run_id=RUN)
    r = client.post("/worker/v1/merge", headers=bearer("worker"), json=env)
    assert r.status_code == 200, r.text
    _step(client, beacon, 3)  # the dispute window closes: settled


def _poll_ms(client: TestClient, calls: int, *, fresh: bool) -> float:
    state: ServiceState = client.app.state.service  # type: ignore[attr-defined]
    times = []
    for _ in range(calls):
        if fresh:
            state._memos.clear()
        start = time.process_time()  # CPU of every thread (the app's too): not the load
        r = client.get(f"/v1/runs/{RUN}/rounds")
        times.append(time.process_time() - start)
        assert r.status_code == 200, r.text
    return statistics.median(times) * 1e3


def measure(rounds: int, calls: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        settings = make_settings(Path(tmp), [k.ss58_address for k in KEYS], beacon_poll_s=1e5)
        beacon = SteppedBeacon()
        with TestClient(create_app(settings, beacon=beacon)) as client:
            doc = manifest_doc(RUN, rate=1.0, segments=1, probation_rounds=0)
            r = client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
            assert r.status_code == 200, r.text
            for key in KEYS:
                r = client.post("/v1/join", json=signed(key, "join", join_body(), run_id=RUN))
                assert r.status_code == 200, r.text
            for index in range(rounds):
                _play_round(client, beacon, index)
                if index + 1 in AT:
                    n = index + 1
                    out[f"fresh_ms_at_{n}"] = round(_poll_ms(client, calls, fresh=True), 3)
                    out[f"kept_ms_at_{n}"] = round(_poll_ms(client, calls, fresh=False), 3)
            phases = {s["phase"] for s in client.get(f"/v1/runs/{RUN}/rounds").json()}
            assert phases == {"final"}, phases
    low, high = AT
    if f"fresh_ms_at_{high}" in out:
        fresh, kept = out[f"fresh_ms_at_{high}"], out[f"kept_ms_at_{high}"]
        out[f"fresh_growth_{low}_to_{high}"] = round(fresh / out[f"fresh_ms_at_{low}"], 2)
        out[f"kept_growth_{low}_to_{high}"] = round(kept / out[f"kept_ms_at_{low}"], 2)
        out[f"fresh_over_kept_at_{high}"] = round(fresh / kept, 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=max(AT))
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    values = measure(args.rounds, args.calls)
    values["commit"] = _commit()
    notes = (
        "Median over the calls of the CPU time (all threads) of one GET of the rounds list"
        " through the app (TestClient, JSON included). fresh: computed from the database on"
        " every call, as before the memo; kept: a poll between two writes. What remains of a"
        " kept poll is the request and the JSON of the list, so it still grows with the"
        " rounds, far more slowly. Shared 2-core machine with other work running: CPU time,"
        " not wall time, so the load moves it little."
    )
    write_result("round_views", values, targets={
        "fresh_over_kept_at_200": "well above 1 (a poll between writes reads nothing)",
    }, notes=notes)  # fmt: skip
    print(values, file=sys.stderr)


if __name__ == "__main__":
    main()
