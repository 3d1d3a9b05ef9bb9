"""A carried state the relay holds *without* an arrival record is judged withheld at once.

The previous review (tests/attacks_found/test_carry_stored_recheck_regional.py) found that
an auditor's store a regional relay kept but could not forward upstream (the auditor's
quota at the origin, an outage) looked held; the island now re-uploads whatever the
origin does not hold with an arrival record (``RelayClient.held_at_origin``), so the
region forwards it. The island has until the upload deadline to do so.

The auditor side was left as it was: ``Auditor.awaited_blob`` waits (or, inside
``judging_ready``, sets the assignment aside) only while the relay answers *not found*.
A regional relay that holds the carried state locally (the failed store) serves its
bytes, and ``check_in_time`` finds no arrival record (a relay with an upstream publishes
the origin's record: none yet). That is an ``IslandInputError`` that is not "missing",
so ``awaited_blob`` re-raises it at once and the audit is ``unverifiable``, *before* the
upload deadline, while the honest island is still uploading the state it owes (and
would have it at the origin in time). ``Auditor.check_uploaded`` (the ready-only gate)
asks ``held``, which the region's local copy also answers yes.

Played with the real auditor over an in-memory relay that keeps arrival records like
the real one (tests/auditor/test_runner.py::ArrivalRelay): every blob arrived before
round 1's selection except the stored carried state, held without a record until the
island's re-upload lands (two beacon rounds later, before the deadline).

The safe behaviour asserted: the honest island's round 1 is ``match`` (the auditor waits
for a record, as for a missing blob, until the deadline), or at least never a fault
before the deadline has passed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.auditor.uploads import UploadPending, judging_ready
from hypertrain.evidence.index import upload_deadline
from hypertrain.relay.errors import NotFoundError
from tests.attacks_found.carried_state_review import (
    Service,
    assignment,
    auditor,
    policy_world,
    two_rounds,
)
from tests.auditor.islands import MemoryRelay
from tests.auditor.world import ISLANDS, World, make_world

ISLAND = ISLANDS[0]
SELECTION = 5


@pytest.fixture(scope="module")
def made(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("carried-arrival"))


class RegionalRelay(MemoryRelay):
    """A relay with arrival records (the origin's, as a regional relay publishes them):
    ``None`` for a blob held here only (a store whose forward upstream failed)."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: dict[str, int] = {}

    def arrival_round(self, sha256: str) -> int | None:
        if sha256 not in self.blobs:
            raise NotFoundError(sha256)
        return self.arrived.get(sha256)


class _Clock(Service):
    """Beacon rounds from the selection on; at the island's re-upload (``lands``), the
    origin records the carried state's arrival."""

    def __init__(self, details: dict[int, object], relay: RegionalRelay, carried: str) -> None:
        super().__init__(details, start=SELECTION)  # type: ignore[arg-type]
        self.relay, self.carried, self.lands = relay, carried, SELECTION + 2

    def beacon_round(self) -> int:
        now = super().beacon_round()
        if now >= self.lands and self.carried not in self.relay.arrived:
            self.relay.arrived[self.carried] = now  # the island's upload, forwarded in time
        return now


def _scenario(made: World, tmp: Path) -> tuple[World, RegionalRelay, dict[int, object], str]:
    world = policy_world(made)
    relay = RegionalRelay()
    relay.put(world.model_blob)
    two = two_rounds(world, tmp, relay=relay)
    carried = two.r0.index.carried
    assert carried is not None
    relay.arrived = {sha: 0 for sha in relay.blobs if sha != carried}  # all on time
    return world, relay, two.details(), carried  # type: ignore[return-value]


def test_a_carried_state_held_without_a_record_is_awaited_until_the_deadline(
    made: World, tmp_path: Path
) -> None:
    world, relay, details, carried = _scenario(made, tmp_path)
    clock = _Clock(details, relay, carried)
    deadline = upload_deadline(SELECTION, world.manifest.round.audit_window_rounds)
    assert clock.lands <= deadline  # the honest island's upload is in time
    judge = auditor(world, relay, clock)
    outcome = judge.judge(details[1], assignment(1, ISLAND, world, SELECTION))  # type: ignore[arg-type]
    judged_at = clock.round
    assert outcome.result == "match", (
        f"honest island judged {outcome.result} at beacon round {judged_at}, before its"
        f" upload deadline {deadline}: {outcome.detail}"
    )


def test_the_ready_only_pass_sets_it_aside_instead_of_faulting(made: World, tmp_path: Path) -> None:
    """``audit_round``'s first pass (``judging_ready``): a blob still awaited must set
    the assignment aside (``UploadPending``), never fault it before the deadline."""
    world, relay, details, carried = _scenario(made, tmp_path)
    clock = _Clock(details, relay, carried)
    clock.lands = 10**9  # not yet: the island's upload is still on its way
    judge = auditor(world, relay, clock)
    with judging_ready():
        try:
            outcome = judge.judge(details[1], assignment(1, ISLAND, world, SELECTION))  # type: ignore[arg-type]
        except UploadPending:
            return  # the safe behaviour: set aside until the blob counts or the deadline
    deadline = upload_deadline(SELECTION, world.manifest.round.audit_window_rounds)
    assert clock.round > deadline, (
        f"judged {outcome.result} at beacon round {clock.round}, before the deadline"
        f" {deadline}: {outcome.detail}"
    )


def test_a_record_past_the_deadline_is_still_withheld(made: World, tmp_path: Path) -> None:
    """Defence that must stay (passes): once the deadline has passed, a carried state
    without a record in time is withheld (``unverifiable``)."""
    world, relay, details, carried = _scenario(made, tmp_path)
    deadline = upload_deadline(SELECTION, world.manifest.round.audit_window_rounds)
    clock = _Clock(details, relay, carried)
    clock.round, clock.lands = deadline + 5, 10**9
    outcome = auditor(world, relay, clock).judge(
        details[1], assignment(1, ISLAND, world, SELECTION)
    )  # type: ignore[arg-type]
    assert outcome.result == "unverifiable", outcome.detail
