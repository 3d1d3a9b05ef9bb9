"""Shared scenery of the carried-state review (tests/attacks_found/test_carried_state_review_*).

Two rounds of one island under ``carry`` played with the real trainer, the real auditor
(:class:`~hypertrain.auditor.runner.Auditor`) and an in-memory relay
(tests/auditor/islands.py): round 0 published (honestly, or with an index that names a
carried state of the attacker's choosing), round 1 trained from the start state the
island derives from what its round-0 index names, and both judged as the auditor judges
them. No test lives here.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypertrain.auditor.replay import AuditOutcome
from hypertrain.auditor.runner import Auditor
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.inputs import island_layout, load_samples, round_sample_ids
from hypertrain.evidence.start import PreviousRound, derive_start_state
from hypertrain.evidence.verify import verify_round_open
from hypertrain.miner.island import train_round
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import AuditAssignment, Commit, RoundOpen
from hypertrain.trainer.carried import CarriedState, decode_carried, encode_carried, is_carried
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.state import TrainState
from tests.auditor.islands import BeaconClock, MemoryRelay, Published, Records, publish_round
from tests.auditor.world import ISLANDS, World

ROSTER = sorted(k.ss58_address for k in ISLANDS)
AUDITOR = ISLANDS[2]


def policy_world(
    made: World,
    *,
    policy: str = "carry",
    error_feedback: bool = False,
    overlap: bool = False,
    decay: float | None = None,
    one_segment: bool = False,
) -> World:
    """``made`` with its manifest's state policy, error feedback and overlap set
    (``one_segment``: J = H, every audit replays the whole round)."""
    doc = made.manifest.model_dump(mode="json")
    if one_segment:
        doc["round"]["checkpoint_interval"] = doc["round"]["inner_steps"]
        doc["audit"]["segments"] = 1
    doc["inner"]["state_policy"] = policy
    doc["compression"]["error_feedback"] = error_feedback
    if decay is not None:
        doc["compression"]["error_feedback_decay"] = decay
    doc["round"]["overlap"] = overlap
    return dataclasses.replace(made, manifest=RunManifest.model_validate(doc))


class Service(BeaconClock):
    """Round details by index, a beacon far past every deadline, a verdict intake."""

    def __init__(self, details: dict[int, Any], start: int = 10**6) -> None:
        super().__init__(start)
        self.details = details
        self.verdicts: list[dict[str, Any]] = []

    def round_detail(self, run_id: str, index: int) -> Any:
        return self.details[index]

    def verdict(self, envelope: Envelope) -> None:
        self.verdicts.append(dict(envelope.body))


def auditor(world: World, relay: Any, service: Service) -> Auditor:
    return Auditor(
        service,  # type: ignore[arg-type]
        relay,
        AUDITOR,
        world.manifest,
        world.dataset_dir,
        upload_poll_s=0,
    )


def records(open_env: Envelope, commits: Sequence[dict[str, Any]]) -> Records:
    return Records(
        Envelope.model_validate(open_env.model_dump()),
        [Envelope.model_validate(c) for c in commits],
    )


def assignment(index: int, key: Hotkey, world: World, selection: int = 1) -> AuditAssignment:
    """Every segment of ``key``'s round ``index`` (J = H / 2 here: segments 0 and 1)."""
    segments = list(range(world.manifest.round.num_segments))
    return AuditAssignment(
        round=index, hotkey=key.ss58_address, segments=segments, selection_beacon_round=selection
    )


def resealed(
    world: World, relay: MemoryRelay, key: Hotkey, pub: Published, carried: str | None
) -> Published:
    """``pub`` with an index naming ``carried`` instead (the island commits that index)."""
    lie = CheckpointIndex(pub.index.round, pub.index.leaves, pub.index.blobs, carried)
    index_sha = relay.put(lie.to_bytes())
    body = pub.commit.model_copy(update={"checkpoint_url": f"http://relay/blobs/{index_sha}"})
    env = seal(
        key,
        domain="commit",
        run_id=world.manifest.run_id,
        body=body.model_dump(mode="json"),
        expiry_round=10**9,
    ).model_dump(mode="json")
    return dataclasses.replace(pub, commit=body, envelope=env, index=lie)


def forged_carried(
    relay: MemoryRelay, world: World, honest: str, change: Callable[[str, Any], Any]
) -> str:
    """A carried state made from ``honest`` (an address) with each tensor ``change``d."""
    config = TrainConfig.from_manifest(world.manifest).state_config()
    state = decode_carried(relay.blobs[honest], config)
    tensors = {name: change(name, t) for name, t in state.tensors.items()}
    return relay.put(encode_carried(CarriedState(state.step, tensors, state.config_digest)))


@dataclass
class TwoRounds:
    relay: MemoryRelay
    opens: list[Envelope]
    r0: Published
    r1: Published
    start1: TrainState

    def details(self, stored: Sequence[str] = ()) -> dict[int, Records]:
        return {0: records(self.opens[0], [self.r0.envelope]),
                1: records(self.opens[1], [self.r1.envelope])}  # fmt: skip


def two_rounds(
    world: World,
    tmp: Path,
    *,
    key: Hotkey = ISLANDS[0],
    relay: MemoryRelay | None = None,
    round0: Callable[[MemoryRelay, Published], Published] | None = None,
    round1_tamper: Callable[[TrainState], TrainState] | None = None,
    round1_update: Callable[[MemoryRelay, Published], bytes] | None = None,
) -> TwoRounds:
    """Round 0 of ``key`` published (``round0`` may rewrite what it commits), round 1
    trained from the start the island derives from its committed round-0 index."""
    manifest = world.manifest
    if relay is None:
        relay = MemoryRelay()
        relay.put(world.model_blob)
    open0 = world.round_open(0, ROSTER)
    opens = [verify_round_open(open0.model_dump(), manifest, 0)]
    r0 = publish_round(world, relay, key, opens, tmp / "r0")
    if round0 is not None:
        r0 = round0(relay, r0)
    open1 = world.round_open(1, ROSTER)
    opens.append(verify_round_open(open1.model_dump(), manifest, 1))
    config = TrainConfig.from_manifest(manifest, round_index=1)
    previous = PreviousRound(r0.commit, lambda: r0.start_params, len(ROSTER))
    start = derive_start_state(
        manifest, config, 1, r0.start_params, previous,
        lambda sha, limit: relay.get(sha, max_bytes=limit),
    )  # fmt: skip
    if round1_update is None:
        r1 = publish_round(world, relay, key, opens, tmp / "r1", start=start, tamper=round1_tamper)
    else:
        update = round1_update(relay, r0)
        r1 = publish_chosen_update(world, relay, key, opens, tmp / "r1", start, update)
    return TwoRounds(relay, [open0, open1], r0, r1, start)


def publish_chosen_update(
    world: World,
    relay: MemoryRelay,
    key: Hotkey,
    opens: Sequence[RoundOpen],
    workdir: Path,
    start: TrainState,
    update: bytes,
) -> Published:
    """``publish_round`` for an island that trains honestly from ``start`` but commits an
    update of its choosing (its own final state may not even encode: a NaN state)."""
    manifest, record = world.manifest, opens[-1]
    layout = island_layout(manifest, record, key.ss58_address)
    config = TrainConfig.from_manifest(manifest, layout=layout, round_index=record.round)
    ids = round_sample_ids(manifest, world.dataset, opens, key.ss58_address)
    result = train_round(start, config, load_samples(world.dataset, ids), workdir)
    blobs = tuple(relay.put(p.read_bytes()) for p in result.checkpoint_paths)
    carried = relay.put(encode_carried(CarriedState(
        result.final.step,
        {n: t for n, t in result.final.tensors.items() if is_carried(n)},
        result.final.config_digest,
    )))  # fmt: skip
    index = CheckpointIndex(record.round, tuple(x.hex() for x in result.leaves), blobs, carried)
    index_sha, update_sha = relay.put(index.to_bytes()), relay.put(update)
    body = Commit(
        round=record.round,
        checkpoint_root=result.root.hex(),
        leaf_count=len(result.leaves),
        update_sha256=update_sha,
        update_bytes=len(update),
        tokens=result.tokens,
        update_url=f"http://relay/blobs/{update_sha}",
        checkpoint_url=f"http://relay/blobs/{index_sha}",
    )
    env = seal(
        key, domain="commit", run_id=manifest.run_id, body=body.model_dump(mode="json"),
        expiry_round=10**9,
    ).model_dump(mode="json")  # fmt: skip
    return Published(body, env, index, result, start.params())


def judge(world: World, two: TwoRounds, index: int, key: Hotkey = ISLANDS[0]) -> AuditOutcome:
    """The auditor's verdict on ``key``'s round ``index`` (nothing posted)."""
    details = two.details()
    return auditor(world, two.relay, Service(details)).judge(
        details[index], assignment(index, key, world)
    )


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
