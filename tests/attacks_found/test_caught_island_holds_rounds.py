"""A caught island kept holding every other round open (an outsider's finding, F1).

docs/threats.md, Silence: a round's commit phase closes early once every *awaited*
island committed, and an island that committed to the round before is awaited. An island
already caught (a standing fault verdict, its escrow burned) stayed on the roster, so it
could alternate a junk commit (which makes it awaited) with silence (which then held the
next round for its whole commit window), for ever, at no further cost: the devnet ran at
half speed, 70 beacon rounds per held round against about 8.

Now an island with a fault by the settlement rule's one definition
(:func:`hypertrain.challenge.facts.accused_before`) is awaited by no later round:
its junk commits are still taken inside the window, and its silence holds nothing. Played
on the real service with a hand-advanced beacon.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.challenge import facts
from hypertrain.challenge.dashboard.traffic import state_bytes
from hypertrain.challenge.rounds import pace
from hypertrain.challenge.store import rounds_storage
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from tests.challenge.dispute_scenario import (
    AUDITOR,
    Service,
    carry_doc,
    joined_run,
    open_round,
    post_tape,
    round_detail,
    tape,
)
from tests.challenge.helpers import bearer, commit_body, manifest_doc, signed

RUN = "run-f1"
HONEST, ALSO_HONEST, CAUGHT = (Hotkey.from_seed(bytes([0x50 + i]) * 32) for i in range(3))
ISLANDS = (HONEST, ALSO_HONEST, CAUGHT)
COMMIT_WINDOW = 3  # the helpers' manifest: round.commit_window_rounds


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    doc = manifest_doc(RUN, rate=1.0, segments=1)
    with joined_run(tmp_path, doc, ISLANDS) as service:
        yield service


@pytest.fixture
def carry_svc(tmp_path: Path) -> Iterator[Service]:
    with joined_run(tmp_path, carry_doc(RUN), ISLANDS) as service:
        yield service


def _detail(svc: Service, index: int) -> dict[str, Any]:
    return round_detail(svc, index, run_id=RUN)


def _open(svc: Service) -> int:
    return open_round(svc, run_id=RUN)


def _commit(svc: Service, index: int, *keys: Hotkey) -> None:
    for key in keys:
        body = commit_body(index, island=key.ss58_address)
        posted = svc.client.post("/v1/commit", json=signed(key, "commit", body, RUN))
        assert posted.status_code == 200, posted.text


def _audited(board: dict[str, Any]) -> list[set[str]]:
    rounds: dict[int, set[str]] = {}
    for a in board["audits"]:
        rounds.setdefault(a["round"], set()).add(a["hotkey"])
    return [rounds[i] for i in sorted(rounds)]


def _finish(svc: Service, index: int, *, excluded: bool = False) -> None:
    """Judge every assignment (the caught island's junk ``unverifiable``), merge, settle."""
    for a in svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/{index}/assignments", headers=bearer("worker")
    ).json():
        junk = a["body"]["hotkey"] == CAUGHT.ss58_address
        body = {
            **a["body"],
            "result": "unverifiable" if junk else "match",
            "update_checked": not junk,
        }
        body.pop("selection_beacon_round")
        verdict = signed(AUDITOR, "verdict", body, RUN)
        posted = svc.client.post("/worker/v1/verdict", headers=bearer("worker"), json=verdict)
        assert posted.is_success, posted.text
    svc.tick(3)
    body = tape(
        index,
        included=sorted(k.ss58_address for k in (HONEST, ALSO_HONEST)),
        excluded={} if index % 2 and not excluded else {CAUGHT.ss58_address: "audit_mismatch"},
    )
    merged = post_tape(svc, body, run_id=RUN)
    assert merged.status_code == 200, merged.text
    svc.tick(3)


def _held_for(svc: Service, index: int) -> int:
    """Beacon rounds from the round's open to its audit selection, the honest islands
    committing at once (and the caught one too in a round where ``index`` is even)."""
    start = svc.beacon.round
    _commit(svc, index, HONEST, ALSO_HONEST, *((CAUGHT,) if index % 2 == 0 else ()))
    for _ in range(COMMIT_WINDOW + 1):
        svc.tick(1)
        if _detail(svc, index)["phase"] != "train":
            break
    return int(_detail(svc, index)["selection_beacon_round"]) - start


def test_a_caught_island_alternating_junk_and_silence_holds_no_round(svc: Service) -> None:
    held = []
    for index in range(5):  # junk, silent, junk, silent, junk
        assert _open(svc) == index
        held.append(_held_for(svc, index))
        _finish(svc, index)
    roster = {r["hotkey"]: r for r in svc.client.get(f"/v1/runs/{RUN}/roster").json()}
    assert roster[CAUGHT.ss58_address]["status"] == "proven_fault", roster
    # round 0 is every island's first; after its fault the caught island is never awaited,
    # so each round closes on the honest islands' commits, one beacon round later
    assert held == [1, 1, 1, 1, 1], held


def test_awaited_leaves_out_the_faulted_islands_from_the_database(svc: Service) -> None:
    """The rule reads only the database: a restarted service reaches the same close."""
    _open(svc)
    _held_for(svc, 0)
    _finish(svc, 0)
    _open(svc)
    state = svc.client.app.state.service  # type: ignore[attr-defined]
    (row,) = [r for r in rounds_storage.open_rounds(state.conn) if r.round == 1]
    assert CAUGHT.ss58_address not in pace.awaited(state, row)
    assert {HONEST.ss58_address, ALSO_HONEST.ss58_address} <= pace.awaited(state, row)
    # one definition of a fault: the rounds' outcomes, as settlement and the views read them
    outcomes = {h for accused in facts.run_accusations(state.conn, RUN).values() for h in accused}
    assert facts.accused_before(state.conn, RUN, 1) == outcomes == {CAUGHT.ss58_address}


def test_a_caught_island_starts_every_later_round_from_the_public_state(
    carry_svc: Service,
) -> None:
    """The open record of every round after the fault lists the caught island in
    ``fresh_start`` (its replays then need nothing it holds privately: evidence.start),
    and no honest island; the dashboard's byte count then charges the caught island's
    audits no carried checkpoint. The honest islands, matched every round, are listed in
    ``carry_stored`` (their auditor stored each carried state), so under ``carry`` their
    audits upload no carried state either."""
    fresh, stored = [], []
    for index in range(3):
        assert _open(carry_svc) == index
        fresh.append(_detail(carry_svc, index)["open"]["body"].get("fresh_start", []))
        stored.append(_detail(carry_svc, index)["open"]["body"].get("carry_stored", []))
        _commit(carry_svc, index, *ISLANDS)  # the caught island commits junk every round
        while _detail(carry_svc, index)["phase"] == "train":
            carry_svc.tick(1)
        _finish(carry_svc, index, excluded=True)
    assert fresh == [[], [CAUGHT.ss58_address], [CAUGHT.ss58_address]], fresh
    honest = sorted(k.ss58_address for k in ISLANDS if k != CAUGHT)
    assert stored == [[], honest, honest], stored
    board = carry_svc.client.get(f"/v1/runs/{RUN}/dashboard").json()
    manifest = RunManifest.model_validate(carry_doc(RUN))
    one = state_bytes(manifest, board["model"]["parameters"])
    uploads = [r["traffic"]["checkpoints"] // one for r in board["rounds"]]
    assert [len(a) for a in _audited(board)] == [3, 3, 3]  # every island, every round
    # one state per selected segment but segment 0, and no carried state (the caught
    # island starts from the public state, the honest ones' were stored by their auditor)
    segments = [
        sum(k > 0 for a in _detail(carry_svc, i)["assignments"] for k in a["body"]["segments"])
        for i in range(3)
    ]
    assert uploads == segments, (uploads, segments)
