"""Dispute cost: messages, bytes and wall time from dispute to decision; referee work.

For the proxy preset and J = 4 and 64, an island whose arithmetic differs in one
operation of one step (the test perturbation hook) disputes an honest auditor's
mismatch verdict through the real challenge service app (in process, SQLite on disk).
Both parties answer every query from their replay of the segment; the referee
recomputes the contested operation. Measured: accepted messages and bytes the service
received, wall time from the open to the ruling (party replays included), the
referee's compute for the one operation, and the baseline it replaces: replaying the
whole segment (J steps) from its start state.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import torch
from fastapi.testclient import TestClient
from tests.challenge.helpers import (
    FakeLedger,
    SteppedBeacon,
    bearer,
    commit_body,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)
from tests.trainer.conftest import make_samples

from common import write_result
from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.dispute.game import Game
from hypertrain.evidence.party import SegmentParty
from hypertrain.evidence.trace import OpRef
from hypertrain.honeypot.perturb import perturbed_ops
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec
from hypertrain.protocol.merkle import MerkleTree
from hypertrain.referee.recompute import recompute
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.segment import TrainConfig, run_segment
from hypertrain.trainer.state import init_state

RUN = "bench"
SEQ_LEN = 17  # the test samples' length
ISLAND, AUDITOR, REFEREE = (Hotkey.from_seed(bytes([b]) * 32) for b in (1, 0x55, 0x66))


def _config(j: int) -> TrainConfig:
    return TrainConfig(
        model=PRESETS["proxy"],
        inner=InnerOptimSpec(warmup_steps=2, total_steps=1000),
        layout=LayoutSpec(micro_batch_size=2),
        seq_len=SEQ_LEN,
        inner_steps=j,
        checkpoint_interval=j,
    )


def _manifest(j: int) -> dict[str, Any]:
    doc = manifest_doc(RUN, rate=1.0, segments=1, probation_rounds=0)
    doc["model"] = PRESETS["proxy"].model_dump(mode="json")
    doc["data"]["seq_len"] = SEQ_LEN
    rnd = doc["round"]
    rnd.update(inner_steps=j, checkpoint_interval=j, audit_window_rounds=50)
    rnd["layout"] = {"micro_batch_size": 2}
    rnd["layout_limits"] = None
    doc["dispute"] = {"referees": [REFEREE.ss58_address]}
    return doc


def _post(client: TestClient, path: str, key: Hotkey, domain: str, body: Any) -> Any:
    r = client.post(path, json=signed(key, domain, body, run_id=RUN))
    assert r.status_code == 200, r.text
    return r.json()


def _verdict(client: TestClient, poll: Any, leaves: list[bytes]) -> str:
    join = join_body()
    join["layout"]["micro_batch_size"] = 2
    _post(client, "/v1/join", ISLAND, "join", join)
    r = client.post(
        f"/admin/v1/runs/{RUN}/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": "aa" * 32, "start_model_url": "http://relay/m0"},
    )
    assert r.status_code == 200, r.text
    root = MerkleTree.from_leaves(leaves).root_hex
    tokens = _manifest_tokens(client)
    _post(
        client,
        "/v1/commit",
        ISLAND,
        "commit",
        {**commit_body(0, tokens), "checkpoint_root": root, "leaf_count": 2},
    )
    poll(4)
    verdict = {"round": 0, "hotkey": ISLAND.ss58_address, "segments": [0], "result": "mismatch"}
    r = client.post(
        "/worker/v1/verdict",
        headers=bearer("worker"),
        json=signed(AUDITOR, "verdict", {**verdict, "first_bad_leaf": 1}, RUN),
    )
    assert r.status_code == 200, r.text
    return str(r.json()["verdict_id"])


def _manifest_tokens(client: TestClient) -> int:
    manifest = client.get(f"/v1/runs/{RUN}/manifest").json()["body"]["manifest"]
    rnd = manifest["round"]
    return int(rnd["inner_steps"]) * int(rnd["layout"]["micro_batch_size"]) * (SEQ_LEN - 1)


def _play(
    client: TestClient, island: SegmentParty, auditor: SegmentParty, open_body: dict[str, Any]
) -> tuple[dict[str, Any], float, float]:
    t0 = time.perf_counter()
    view = _post(client, "/v1/disputes", ISLAND, "dispute-open", open_body)
    dispute_id = view["dispute_id"]
    referee_s = 0.0
    while True:
        game = Game.model_validate(view["game"])
        if game.stage == "decided":
            return view, time.perf_counter() - t0, referee_s
        if game.stage == "referee":
            if game.inputs_sha256 is None:
                r = client.put(f"/v1/disputes/{dispute_id}/inputs", content=island.op_inputs(game))
                assert r.status_code == 200, r.text
                view = r.json()
                continue
            data = client.get(f"/v1/disputes/{dispute_id}/inputs").content
            assert game.op is not None
            r0 = time.perf_counter()
            outputs = recompute(game.op, data)
            referee_s = time.perf_counter() - r0
            ruling = {
                "dispute_id": dispute_id,
                "query": game.query,
                "inputs_sha256": hashlib.sha256(data).hexdigest(),
                "outputs": outputs,
            }
            view = _post(
                client, f"/v1/disputes/{dispute_id}/ruling", REFEREE, "dispute-ruling", ruling
            )
            continue
        for key, party in ((ISLAND, island), (AUDITOR, auditor)):
            body = party.answer(game).model_dump(mode="json")
            view = _post(client, f"/v1/disputes/{dispute_id}/answer", key, "dispute-answer", body)


def measure(j: int, tmp: Path) -> dict[str, Any]:
    config = _config(j)
    start = init_state(config.state_config(), seed=7)
    samples = make_samples(j * config.samples_per_step, vocab=config.model.vocab_size)
    where = OpRef(step=j // 2, section=2, index=5)  # mb0.layers.2, sixth operation
    ops = perturbed_ops(start.step + where.step, where)
    island = SegmentParty(start, config, samples, op_hooks=ops)
    auditor = SegmentParty(start, config, samples)
    t0 = time.perf_counter()
    run_segment(start, config, samples, j)
    segment_s = time.perf_counter() - t0
    leaves = [bytes.fromhex(h) for h in island.state_hashes([0, j])]
    tree = MerkleTree.from_leaves(leaves)
    settings = make_settings(tmp, [ISLAND.ss58_address])
    beacon = SteppedBeacon()
    with TestClient(create_app(settings, beacon=beacon, ledger=FakeLedger())) as client:
        r = client.post("/admin/v1/runs", json={"manifest": _manifest(j)}, headers=bearer("admin"))
        assert r.status_code == 200, r.text

        def poll(rounds: int) -> None:
            beacon.round += rounds
            client.portal.call(_poll_beacon, client.app.state.service)  # type: ignore[union-attr,attr-defined]

        verdict_id = _verdict(client, poll, leaves)
        open_body = {
            "round": 0,
            "verdict_id": verdict_id,
            "segment": 0,
            "start": {"leaf": leaves[0].hex(), "proof": tree.proof(0).to_json()},
            "end": {"leaf": leaves[1].hex(), "proof": tree.proof(1).to_json()},
        }
        view, wall_s, referee_s = _play(client, island, auditor, open_body)
    game = view["game"]
    assert game["outcome"] == "upheld" and game["step"] == where.step, game
    assert (game["section"], game["op_index"]) == (where.section, where.index), game
    return {
        f"j{j}_messages": game["messages"],
        f"j{j}_bytes": view["bytes_in"],
        f"j{j}_dispute_to_decision_s": round(wall_s, 3),
        f"j{j}_referee_op_s": round(referee_s, 6),
        f"j{j}_segment_replay_s": round(segment_s, 3),
        f"j{j}_referee_vs_segment_ratio": referee_s / segment_s,
        f"j{j}_contested_op": game["op"]["op"],
    }


def main() -> None:
    torch.set_num_threads(1)
    values: dict[str, Any] = {}
    with TemporaryDirectory() as tmp:
        for j in (4, 64):
            values |= measure(j, Path(tmp) / f"j{j}")
    write_result(
        "dispute",
        values,
        targets={
            "j4_referee_vs_segment_ratio": "one operation, not a segment",
            "j64_referee_vs_segment_ratio": "one operation, not a segment",
        },
        notes=(
            "Proxy preset, 2-sample micro-batches of 17 tokens, one thread; service in process"
            " (SQLite on disk). `messages` counts accepted messages (open, answers, inputs,"
            " ruling); `bytes` is what the service received (envelopes and the input tensors)."
            " Wall time includes both parties' replays and step traces. Binary bisection"
            " (fanout 1): ceil(log2 J) step queries, then one layer and one op query."
            " The machine is 2 shared cores with other work running, so wall times are noisy;"
            " the dispute-to-decision time is dominated by the parties' own replays (each replays"
            " the segment once and traces the disputed step with every operation hashed), not by"
            " the service or the referee."
        ),
    )


if __name__ == "__main__":
    main()
