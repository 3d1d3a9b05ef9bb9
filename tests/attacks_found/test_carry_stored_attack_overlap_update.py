"""``carry_stored`` with overlapped rounds: the island's own update is read as a public input.

docs/mechanism.md: for an island the round-open record lists in ``carry_stored`` "the
stored bytes are a public input: if the relay cannot serve them the audit waits and
retries, and the island is not blamed". The auditor implements that by handing
:meth:`~hypertrain.auditor.runner.Auditor.stored_blob` (every relay failure raised,
retried, never the island's) to :func:`~hypertrain.evidence.start.derive_start_state`
for *every* fetch of the previous round, not only the state the auditor stored. Under
``round.overlap`` that derivation also fetches the island's own round-``r - 1`` update
(the overlapped start is round ``r - 1``'s start model minus ``1 / M`` of it), a blob
only the island ever uploads. A ``match`` never fetches the update (the auditor compares
the hash of its own re-encoding), so an island that withholds its update in round
``r - 1`` is still matched and listed; in round ``r`` it may then train anything: its
audit fails to fetch the update on every pass and re-audit, and is never judged. Without
the listing the same withheld update is the island's fault (``unverifiable``).

Played with the real auditor (judge_and_post stores the carried state) over an in-memory
relay, the islands' rounds trained for real (tests/auditor/islands.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from hypertrain.auditor.runner import Auditor, judge_and_post
from hypertrain.evidence.start import PreviousRound, derive_start_state
from hypertrain.evidence.verify import verify_round_open
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.errors import RelayError
from hypertrain.trainer.segment import TrainConfig
from tests.auditor.islands import (
    BeaconClock,
    MemoryRelay,
    Published,
    Records,
    inject_moments,
    publish_round,
)
from tests.auditor.world import ISLANDS, World, make_world

ISLAND = ISLANDS[0]
ROSTER = sorted(k.ss58_address for k in ISLANDS)


def _world(made: World, *, overlap: bool) -> World:
    doc = made.manifest.model_dump(mode="json")
    doc["round"]["overlap"] = overlap
    doc["inner"]["state_policy"] = "carry"
    doc["compression"]["error_feedback"] = False
    return dataclasses.replace(made, manifest=RunManifest.model_validate(doc))


@pytest.fixture(scope="module")
def made(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("carry-overlap"))


class _Service(BeaconClock):
    """Round details by index, a beacon far past every deadline, and a verdict intake."""

    def __init__(self, details: dict[int, Records]) -> None:
        super().__init__(10**6)
        self.details = details
        self.verdicts: list[str] = []

    def round_detail(self, run_id: str, index: int) -> Any:
        return self.details[index]

    def verdict(self, envelope: Envelope) -> None:
        self.verdicts.append(envelope.body["result"])


def _sealed_open(world: World, index: int, stored: Sequence[str]) -> Envelope:
    return world.round_open(index, ROSTER, carry_stored=sorted(stored))


def _records(open_env: Envelope, published: Published) -> Records:
    return Records(
        Envelope.model_validate(open_env.model_dump()),
        [Envelope.model_validate(published.envelope)],
    )


def _auditor(world: World, relay: MemoryRelay, service: _Service) -> Auditor:
    return Auditor(service, relay, ISLANDS[2], world.manifest, world.dataset_dir, upload_poll_s=0)  # type: ignore[arg-type]


def _two_rounds(
    world: World, tmp: Path, *, withhold_update: bool, cheat: bool
) -> tuple[MemoryRelay, Records, Published, Published]:
    """Round 0 trained honestly and matched by an auditor that stores its carried state
    (the island withholding its round-0 update when asked), then the island's round 1
    (cheating when asked): the relay, round 0's records and both publications."""
    manifest = world.manifest
    relay = MemoryRelay()
    relay.put(world.model_blob)
    open0 = world.round_open(0, ROSTER)
    opens = [verify_round_open(open0.model_dump(), manifest, 0)]
    r0 = publish_round(world, relay, ISLAND, opens, tmp / "r0")
    assert r0.index.carried is not None
    kept = {k: relay.blobs.pop(k) for k in (r0.index.carried, r0.commit.update_sha256)}
    if not withhold_update:
        relay.blobs[r0.commit.update_sha256] = kept[r0.commit.update_sha256]
    records0 = _records(open0, r0)
    service = _Service({0: records0})
    assignment = AuditAssignment(
        round=0, hotkey=ISLAND.ss58_address, segments=[0, 1], selection_beacon_round=1
    )
    outcome = judge_and_post(_auditor(world, relay, service), records0, assignment, _quiet)
    assert (outcome.result, service.verdicts) == ("match", ["match"]), outcome.detail
    assert r0.index.carried in relay.blobs  # the auditor stored the carried state
    # round 1: the island derives its start from what it holds itself
    opens.append(verify_round_open(_sealed_open(world, 1, []).model_dump(), manifest, 1))
    local = {**relay.blobs, **kept}
    config = TrainConfig.from_manifest(manifest, round_index=1)
    previous = PreviousRound(r0.commit, lambda: r0.start_params, len(ROSTER))
    start = derive_start_state(
        manifest, config, 1, r0.start_params, previous, lambda sha, _: local[sha]
    )
    tamper = inject_moments(0.5) if cheat else None
    r1 = publish_round(world, relay, ISLAND, opens, tmp / "r1", start=start, tamper=tamper)
    return relay, records0, r0, r1


def _judge_round_1(
    world: World, relay: MemoryRelay, records0: Records, r1: Published, stored: Sequence[str]
) -> Any:
    details = {0: records0, 1: _records(_sealed_open(world, 1, stored), r1)}
    assignment = AuditAssignment(
        round=1, hotkey=ISLAND.ss58_address, segments=[0, 1], selection_beacon_round=1
    )
    return _auditor(world, relay, _Service(details)).judge(details[1], assignment)


def _quiet(*_: Any, **__: Any) -> None:
    return None


def test_a_listed_island_that_withheld_its_update_escapes_its_next_audit(
    made: World, tmp_path: Path
) -> None:
    """Found by an attacker review, fixed. Overlapped rounds under ``carry``: the
    island withholds its round-0 update (a match never fetches it), is listed in round 1's
    ``carry_stored`` and cheats in round 1. The auditor read every previous-round blob of
    a listed island as a public input, so the withheld update was retried for ever. Now a
    listed island's blobs stay its own to provide (the list only spares the upload of what
    the relay already holds), so the withheld update is ``unverifiable`` listed or not."""
    world = _world(made, overlap=True)
    relay, records0, _, r1 = _two_rounds(world, tmp_path, withhold_update=True, cheat=True)
    unlisted = _judge_round_1(world, relay, records0, r1, [])
    assert unlisted.result == "unverifiable", unlisted.detail  # the island's own blob
    try:
        listed = _judge_round_1(world, relay, records0, r1, [ISLAND.ss58_address])
    except RelayError as exc:
        pytest.fail(
            f"the cheating round is never judged: the island's update read as public ({exc})"
        )
    assert listed.result in ("unverifiable", "mismatch"), listed.detail


def test_a_listed_honest_island_under_overlap_is_matched_from_the_stored_state(
    made: World, tmp_path: Path
) -> None:
    """The defence as designed (passes): an honest island listed in ``carry_stored``
    under overlapped rounds uploads nothing; its audit derives the start from the state
    the auditor stored and its own uploaded update, and matches. A cheat is caught."""
    world = _world(made, overlap=True)
    relay, records0, _, r1 = _two_rounds(world, tmp_path, withhold_update=False, cheat=False)
    listed = _judge_round_1(world, relay, records0, r1, [ISLAND.ss58_address])
    assert listed.result == "match", listed.detail
    relay, records0, _, r1 = _two_rounds(
        world, tmp_path / "cheat", withhold_update=False, cheat=True
    )
    caught = _judge_round_1(world, relay, records0, r1, [ISLAND.ss58_address])
    assert (caught.result, caught.check) == ("mismatch", "start"), caught.detail


def test_a_listed_island_whose_stored_state_is_gone_still_owes_it(
    made: World, tmp_path: Path
) -> None:
    """``carry`` without overlap (after the fix): the list says only what the relay should
    hold. The island still owes its carried state (it uploads it whenever the relay lacks
    it: ``miner.checkpoints.upload_selected``), so a stored state that is gone, or was
    never stored (a re-audit, a refused store), ends in a verdict, never an endless wait:
    withheld past the upload deadline, the audit is ``unverifiable``."""
    world = _world(made, overlap=False)
    relay, records0, r0, r1 = _two_rounds(world, tmp_path, withhold_update=False, cheat=True)
    assert _judge_round_1(world, relay, records0, r1, [ISLAND.ss58_address]).result == "mismatch"
    assert r0.index.carried is not None
    del relay.blobs[r0.index.carried]  # the stored state is gone (or was never stored)
    gone = _judge_round_1(world, relay, records0, r1, [ISLAND.ss58_address])
    assert gone.result == "unverifiable", gone.detail
