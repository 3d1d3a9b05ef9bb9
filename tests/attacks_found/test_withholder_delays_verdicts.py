"""A caught island withholds what it was selected for, and every island judged after it
is late (found on a devnet).

docs/threats.md (Auditor): an island audited every round has nothing left to lose, so it
withholds its selected checkpoint (or, under ``carry``, its previous carried state)
every round. The auditor judged a round's islands one after another and waited for the
withheld upload until the upload deadline, so an honest island judged after it got its
verdict only then: once after the audit window, and its update was left out of the merge
as ``audit_pending``.

Now the auditor first judges every assignment whose inputs the relay holds, and only then
waits for the missing uploads (``hypertrain.auditor.uploads``): the honest island's
``match`` is posted before the withholder's upload deadline, and the withholder still gets
``unverifiable`` once its deadline has passed. Driven by a stepped beacon (each read of
it is one round), so nothing depends on timing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hypertrain.auditor.runner import Auditor, audit_round
from hypertrain.evidence.index import upload_deadline
from hypertrain.evidence.verify import verify_round_open
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.trainer.round_config import island_train_config
from hypertrain.trainer.start_state import carried_of, carry_state
from tests.auditor.islands import BeaconClock, MemoryRelay, Published, publish_round
from tests.auditor.world import COORD, ISLANDS, RUN_ID, World, make_world

SELECTION = 5  # the selecting beacon round of every assignment
WITHHOLDER, HONEST, AUDITOR = ISLANDS


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("withholder"))


@dataclass
class Detail:
    """A round as the auditor reads it from the service."""

    open: Envelope
    commits: list[Envelope]
    assignments: list[Envelope]


class Service(BeaconClock):
    """The service as ``audit_round`` sees it: round records, the beacon, verdict posts
    (each kept with the beacon round it was posted at)."""

    def __init__(self, details: dict[int, Detail]) -> None:
        super().__init__(SELECTION)
        self.details, self.posted = details, list[tuple[str, str, int]]()

    def round_detail(self, run_id: str, index: int) -> Detail:
        return self.details[index]

    def verdict(self, env: Envelope) -> None:
        self.posted.append((env.body["hotkey"], env.body["result"], self.round))


def _assignment(index: int, hotkey: str, segments: list[int]) -> Envelope:
    body = AuditAssignment(
        round=index, hotkey=hotkey, segments=segments, selection_beacon_round=SELECTION
    )
    return seal(COORD, domain="audit-assignment", run_id=RUN_ID,
                body=body.model_dump(mode="json"), expiry_round=10**9)  # fmt: skip


def _envelope(pub: Published) -> Envelope:
    return Envelope.model_validate(pub.envelope)


Rounds = tuple[World, dict[int, Detail], int]  # the world, its rounds, the audited one
Kept = dict[str, bytes] | None


def _selected(world: World, relay: MemoryRelay, tmp: Path, kept: Kept = None) -> Rounds:
    """Round 0: both islands train honestly; the withholder keeps its selected checkpoint
    (into ``kept``, when given)."""
    record = world.round_open(0, [WITHHOLDER.ss58_address, HONEST.ss58_address])
    opens = [verify_round_open(record.model_dump(), world.manifest, 0)]
    pubs = [publish_round(world, relay, k, opens, tmp / str(i))
            for i, k in enumerate((WITHHOLDER, HONEST))]  # fmt: skip
    sha = pubs[0].index.blobs[1]  # selected for segment 1: not uploaded
    withheld = relay.blobs.pop(sha)
    if kept is not None:
        kept[sha] = withheld
    assignments = [_assignment(0, k.ss58_address, [1]) for k in (WITHHOLDER, HONEST)]
    return world, {0: Detail(record, [_envelope(p) for p in pubs], assignments)}, 0


def _carried(world: World, relay: MemoryRelay, tmp: Path) -> Rounds:
    """Under ``carry``, rounds 0 and 1 of both islands, each round-1 start state carried
    honestly; the withholder keeps its round-0 carried state (the one its round-1
    start state is carried from), so its round-1 audit waits for it."""
    inner = world.manifest.inner.model_copy(update={"state_policy": "carry"})
    world = dataclasses.replace(world, manifest=world.manifest.model_copy(update={"inner": inner}))
    roster = [WITHHOLDER.ss58_address, HONEST.ss58_address]
    records = [world.round_open(w, roster) for w in range(2)]
    opens = [verify_round_open(r.model_dump(), world.manifest, w) for w, r in enumerate(records)]
    rounds: list[list[Published]] = []
    state_config = island_train_config(world.manifest, 0).state_config()
    for w in range(2):
        pubs = []
        for i, key in enumerate((WITHHOLDER, HONEST)):
            start = None
            if rounds:
                prev = rounds[-1][i]
                carried = carried_of(prev.result.final, prev.start_params,
                                     world.manifest.compression)  # fmt: skip
                start = carry_state(carried, prev.start_params, state_config)
            pubs.append(publish_round(world, relay, key, opens[: w + 1], tmp / f"{w}-{i}",
                                      start=start))  # fmt: skip
        rounds.append(pubs)
    carried = rounds[0][0].index.carried
    assert carried is not None
    del relay.blobs[carried]  # the state the withholder's round 0 carried
    assignments = [_assignment(1, k.ss58_address, [0]) for k in (WITHHOLDER, HONEST)]
    details = {
        w: Detail(records[w], [_envelope(p) for p in rounds[w]], assignments if w else [])
        for w in range(2)
    }
    return world, details, 1


@pytest.mark.parametrize("build", [_selected, _carried], ids=["selected", "carried"])
def test_a_withheld_upload_delays_only_its_own_verdict(
    world: World, tmp_path: Path, build: Any
) -> None:
    relay = MemoryRelay()
    relay.put(world.model_blob)
    world, details, index = build(world, relay, tmp_path)
    service = Service(details)
    auditor = Auditor(service, relay, AUDITOR, world.manifest, world.dataset_dir,  # type: ignore[arg-type]
                      upload_poll_s=0)  # fmt: skip
    events: list[tuple[str, dict[str, Any]]] = []
    outcomes = audit_round(auditor, index, lambda e, **f: events.append((e, f)))
    assert [e for e, _ in events] == ["verdict", "verdict"], events
    assert len(outcomes) == 2
    deadline = upload_deadline(SELECTION, world.manifest.round.audit_window_rounds)
    (first, result, at), (last, late, after) = service.posted
    assert (first, result) == (HONEST.ss58_address, "match")
    assert at <= deadline  # judged while the withholder's upload wait was still open
    assert (last, late) == (WITHHOLDER.ss58_address, "unverifiable")
    assert after > deadline  # at its own deadline, as before


def test_an_upload_in_time_after_the_others_were_judged_still_matches(
    world: World, tmp_path: Path
) -> None:
    """The set-aside assignment is polled, not given up: its checkpoint, uploaded after
    the other island's verdict and before its own deadline, is judged ``match``."""
    relay = MemoryRelay()
    relay.put(world.model_blob)
    held: dict[str, bytes] = {}
    world, details, index = _selected(world, relay, tmp_path, held)
    service = Service(details)
    service.on_poll = lambda polls: relay.blobs.update(held) if polls == 2 else None
    auditor = Auditor(service, relay, AUDITOR, world.manifest, world.dataset_dir,  # type: ignore[arg-type]
                      upload_poll_s=0)  # fmt: skip
    audit_round(auditor, index, lambda e, **f: None)
    deadline = upload_deadline(SELECTION, world.manifest.round.audit_window_rounds)
    assert [(h, r) for h, r, _ in service.posted] == [
        (HONEST.ss58_address, "match"),
        (WITHHOLDER.ss58_address, "match"),
    ]
    assert service.posted[-1][2] <= deadline
