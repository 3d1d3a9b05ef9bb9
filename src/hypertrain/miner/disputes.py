"""The island's side of disputes: contest a mismatch its own replay refutes, then answer.

For each mismatch verdict on its own round, ``watch --follow`` replays the judged
segment from the checkpoint it stored (the same bytes it committed) on the samples
the round assigned it. Only when that replay reproduces its committed end leaf does
it open a dispute, with inclusion proofs of the segment's start and end leaves; it
then answers every query of the game from the same replay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundSummary
from hypertrain.dispute.game import Game
from hypertrain.dispute.messages import DisputeOpen, LeafProof
from hypertrain.evidence.inputs import island_layout, load_samples, open_dataset, round_sample_ids
from hypertrain.evidence.party import SegmentParty
from hypertrain.evidence.respond import take_part
from hypertrain.miner.context import RunContext, round_records
from hypertrain.miner.island import checkpoint_path
from hypertrain.miner.report import Reporter
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.merkle import MerkleTree
from hypertrain.trainer.checkpoint import decode_checkpoint
from hypertrain.trainer.round_config import island_train_config

# Refusals of an opening that end the attempt, not the watch loop (docs/mechanism.md).
REFUSALS = frozenset({"duplicate", "late", "no_bond", "not_first_difference", "reassigned"})


def segment_party(ctx: RunContext, key: Hotkey, index: int, segment: int) -> SegmentParty:
    """This island's replay of segment ``segment`` of round ``index`` from its checkpoint."""
    records, _ = round_records(ctx, index)
    manifest = ctx.manifest
    layout = island_layout(manifest, records[-1], key.ss58_address)
    config = island_train_config(manifest, index, layout=layout, device=ctx.config.device)
    dataset = open_dataset(Path(ctx.config.dataset_dir), manifest)
    ids = round_sample_ids(manifest, dataset, records, key.ss58_address)
    per_segment = config.checkpoint_interval * config.samples_per_step
    chunk = ids[segment * per_segment : (segment + 1) * per_segment]
    raw = checkpoint_path(ctx.config.round_dir(index), segment).read_bytes()
    start = decode_checkpoint(raw, config.state_config())
    first = segment * config.checkpoint_interval
    samples = load_samples(dataset, chunk)
    return SegmentParty(start, config, samples, first_step=first, op_hooks=ctx.hooks(index).ops)


def stored_leaves(ctx: RunContext, index: int, leaf_count: int) -> list[bytes]:
    """The committed leaves: each checkpoint file ends with its state hash."""
    out = []
    for k in range(leaf_count):
        with checkpoint_path(ctx.config.round_dir(index), k).open("rb") as handle:
            handle.seek(-32, 2)
            out.append(handle.read(32))
    return out


def contest(
    ctx: RunContext, key: Hotkey, verdict: dict[str, Any], reporter: Reporter
) -> str | None:
    """Open a dispute against ``verdict`` if this island's replay refutes it."""
    body = verdict["envelope"]["body"]
    index, bad = int(body["round"]), body.get("first_bad_leaf")
    segment = int(bad) - 1 if bad else int(body["segments"][0])
    if segment < 0 or segment not in body["segments"]:
        reporter.event("dispute_skipped", round=index, reason="no disputable segment")
        return None
    commit = _own_commit(ctx, key, index)
    leaves = stored_leaves(ctx, index, int(commit["leaf_count"]))
    if MerkleTree.from_leaves(leaves).root_hex != commit["checkpoint_root"]:
        reporter.event("dispute_skipped", round=index, reason="stored checkpoints are not ours")
        return None
    party = segment_party(ctx, key, index, segment)
    end = party.state_hashes([party.config.checkpoint_interval])[0]
    if end != leaves[segment + 1].hex():
        reporter.event("dispute_skipped", round=index, reason="own replay does not reproduce")
        return None
    return _open(ctx, key, verdict["verdict_id"], index, segment, leaves, reporter)


def _own_commit(ctx: RunContext, key: Hotkey, index: int) -> dict[str, Any]:
    detail = ctx.service.round_detail(ctx.manifest.run_id, index)
    raw = next(c for c in detail.commits if c.signer == key.ss58_address)
    return dict(raw.body)


def _open(
    ctx: RunContext,
    key: Hotkey,
    verdict_id: str,
    index: int,
    segment: int,
    leaves: list[bytes],
    reporter: Reporter,
) -> str | None:
    tree = MerkleTree.from_leaves(leaves)

    def proof(i: int) -> LeafProof:
        return LeafProof(leaf=leaves[i].hex(), proof=tree.proof(i).to_json())

    body = DisputeOpen(
        round=index,
        verdict_id=verdict_id,
        segment=segment,
        start=proof(segment),
        end=proof(segment + 1),
    )
    env = seal(
        key,
        domain="dispute-open",
        run_id=ctx.manifest.run_id,
        body=body.model_dump(mode="json"),
        expiry_round=ctx.service.beacon_round() + ctx.config.expiry_margin,
    )
    try:
        answer = ctx.service.open_dispute(env)
    except ServiceError as exc:
        if exc.code not in REFUSALS:
            raise
        reporter.event("dispute_refused", round=index, code=exc.code)
        return None
    reporter.event(
        "dispute_opened", round=index, segment=segment, dispute_id=answer.dispute_id[:16]
    )
    return answer.dispute_id


def answer_own(
    ctx: RunContext, key: Hotkey, parties: dict[str, SegmentParty], reporter: Reporter
) -> int:
    """One pass: answer the open query of every undecided dispute this island opened."""
    sent = 0
    for view in ctx.service.disputes(ctx.manifest.run_id):
        if view.hotkey != key.ss58_address:
            continue
        if view.game.stage == "decided":
            if parties.pop(view.dispute_id, None) is not None:
                reporter.event(
                    "dispute_decided",
                    dispute_id=view.dispute_id[:16],
                    outcome=view.game.outcome,
                    reason=view.game.reason,
                )
            continue

        def party_for(game: Game) -> SegmentParty:
            return segment_party(ctx, key, game.round, game.segment)

        sent += take_part(
            ctx.service,
            key,
            view,
            parties,
            party_for,
            expiry_margin=ctx.config.expiry_margin,
            emit=reporter.event,
        )
    return sent


def prunable(phase: str, deadline: int | None, now: int, undecided: bool) -> bool:
    """A final round whose dispute window has closed and whose disputes are all decided."""
    return phase == "final" and deadline is not None and now > deadline and not undecided


def prune_round(workdir: Path) -> int:
    """Delete a round's checkpoints but the last (the next round carries its optimizer state)."""
    paths = sorted(workdir.glob("ckpt_*.bin"), key=lambda p: int(p.stem.removeprefix("ckpt_")))
    for path in paths[:-1]:
        path.unlink()
    return max(len(paths) - 1, 0)


def prune_closed(
    ctx: RunContext, key: Hotkey, rounds: list[RoundSummary], reporter: Reporter
) -> int:
    """Prune every round no dispute can need any more; returns the files removed."""
    now, removed = ctx.service.beacon_round(), 0
    games = [d for d in ctx.service.disputes(ctx.manifest.run_id) if d.hotkey == key.ss58_address]
    for summary in rounds:
        index = summary.round
        undecided = any(d.round == index and d.game.outcome is None for d in games)
        workdir = ctx.config.round_dir(index)
        if workdir.exists() and prunable(
            summary.phase, summary.dispute_deadline_round, now, undecided
        ):
            count = prune_round(workdir)
            if count:
                reporter.event("pruned", round=index, checkpoints=count)
            removed += count
    return removed
