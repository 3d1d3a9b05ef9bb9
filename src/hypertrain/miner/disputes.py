"""The island's side of disputes: open one, answer its game, prune what none can need.

Which verdicts the island disputes, and after which local check, is
:mod:`hypertrain.miner.defence`'s. A dispute opens with inclusion proofs of the
segment's start and end leaves (:func:`open_dispute`); the island then answers every
query of a bisection game from its replay of the segment from the checkpoint it
stored (the same bytes it committed), on the samples the round assigned it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail, RoundSummary
from hypertrain.dispute.game import Game
from hypertrain.dispute.messages import DisputeOpen, LeafProof
from hypertrain.evidence.inputs import (
    island_layout,
    load_samples,
    open_dataset,
    segment_samples,
)
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
    ids = ctx.opens.sample_ids(dataset, index, key.ss58_address)
    chunk = segment_samples(ids, config, segment)
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


@dataclass(frozen=True, slots=True)
class Opened:
    """The service's answer to an opening: the dispute's id, or the refusal's code."""

    dispute_id: str | None
    refusal: str | None = None


def open_dispute(
    ctx: RunContext,
    key: Hotkey,
    verdict_id: str,
    index: int,
    segment: int,
    leaves: list[bytes],
) -> Opened:
    """Open a dispute of ``verdict_id`` on ``segment``, proving its start and end leaves.

    The service decides from the verdict which dispute it is: a bisection game on the
    first differing segment, or a ``recompute`` re-decision (``start``, ``update``,
    ``unverifiable``) on any audited segment.
    """
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
        return Opened(None, exc.code)
    return Opened(answer.dispute_id)


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


def prunable(
    phase: str, deadline: int | None, now: int, undecided: bool, audits_closed: bool = False
) -> bool:
    """A final round no fault-bearing verdict on this island can still reach or be disputed in.

    The round is final, its dispute window has closed, its disputes are all decided, and
    ``audits_closed``: every assignment of this island in it has a standing verdict whose
    own dispute window has closed (:func:`audits_closed`). That last fact is the caller's
    to show; without it the round's evidence is kept (a late verdict gets a window of its
    own, so the round's deadline alone never proves that no dispute can need it).
    """
    window_closed = deadline is not None and now > deadline
    return phase == "final" and window_closed and not undecided and audits_closed


def audits_closed(
    detail: RoundDetail,
    hotkey: str,
    reassigned: set[tuple[int, str]],
    first_seen: Mapping[str, int],
    window: int,
    now: int,
) -> bool:
    """Every assignment of ``hotkey`` in the round has a standing verdict, past its window.

    An assignment with no verdict yet, or whose verdict was set aside for a re-audit
    (listed by ``/reassigned``), may still get a fault-bearing one. A verdict's own window
    runs ``window`` beacon rounds from its arrival (never before the round's deadline);
    the island bounds the arrival by the beacon round it first saw the verdict at
    (``first_seen``), so it never deletes before the service's window closes.
    """
    if not any(a.body.get("hotkey") == hotkey for a in detail.assignments):
        return True  # not audited this round: no verdict on it can arrive
    if (detail.round, hotkey) in reassigned:
        return False
    mine = [v for v in detail.verdicts if v.envelope.body.get("hotkey") == hotkey]
    if not mine:
        return False
    round_deadline = detail.dispute_deadline_round or 0
    for record in mine:
        seen = first_seen.get(record.verdict_id)
        if seen is None or now <= max(round_deadline, seen + window):
            return False
    return True


def prune_round(workdir: Path) -> int:
    """Delete a round's checkpoints but the last (the next round carries its optimizer state)."""
    paths = sorted(workdir.glob("ckpt_*.bin"), key=lambda p: int(p.stem.removeprefix("ckpt_")))
    for path in paths[:-1]:
        path.unlink()
    return max(len(paths) - 1, 0)


def prune_closed(
    ctx: RunContext,
    key: Hotkey,
    rounds: list[RoundSummary],
    reporter: Reporter,
    first_seen: Mapping[str, int],
) -> int:
    """Prune every round no dispute can need any more; returns the files removed.

    ``first_seen`` maps each verdict id this island saw to the beacon round it first
    saw it at (what bounds that verdict's own dispute window).
    """
    run_id, me = ctx.manifest.run_id, key.ss58_address
    now, removed = ctx.service.beacon_round(), 0
    games = [d for d in ctx.service.disputes(run_id) if d.hotkey == me]
    reassigned: set[tuple[int, str]] | None = None
    for summary in rounds:
        index = summary.round
        workdir = ctx.config.round_dir(index)
        undecided = any(d.round == index and d.game.outcome is None for d in games)
        deadline = summary.dispute_deadline_round
        if not workdir.exists() or not prunable(summary.phase, deadline, now, undecided, True):
            continue
        if reassigned is None:
            reassigned = {(r.round, r.hotkey) for r in ctx.service.reassigned(run_id)}
        detail = ctx.service.round_detail(run_id, index)
        window = ctx.manifest.round.dispute_window_rounds
        if not audits_closed(detail, me, reassigned, first_seen, window, now):
            continue
        count = prune_round(workdir)
        if count:
            reporter.event("pruned", round=index, checkpoints=count)
        removed += count
    return removed
