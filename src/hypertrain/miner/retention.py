"""What a training island keeps on disk while it follows a run for hundreds of rounds.

Every round writes ``H/J + 1`` full training states (tens of MB each on the proxy model).
An island that never deletes them fills its disk in a long run, and then it stops: a
long-run network died of exactly that. ``run --follow`` therefore prunes as it goes,
by the same rule ``watch`` applies (:func:`hypertrain.miner.disputes.prunable` and
``audits_closed``): a round is *closed* once it is final, its dispute window has passed,
no dispute of this island in it is undecided, and every verdict on this island in it has
had its own window from when this island first saw it. A closed round keeps only its
final checkpoint and the state it carried (the next round's ``carry`` start state is
derived from that); once the round after it is closed too, nothing can need it any more
and its directory goes.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from hypertrain.api.models import RoundSummary
from hypertrain.miner.context import RunContext
from hypertrain.miner.disputes import audits_closed, prunable, prune_round
from hypertrain.miner.report import Reporter
from hypertrain.protocol.identity import Hotkey

KEEP_RECENT = 2  # the newest rounds are never looked at (still training, auditing, settling)
PER_POLL = 4  # closed-round checks per poll (each reads one round's records)


@dataclass
class Retention:
    """The follow loop's memory: when each verdict on this island was first seen, and which
    rounds are closed."""

    first_seen: dict[str, int] = field(default_factory=dict)
    closed: set[int] = field(default_factory=set)

    def prune(
        self, ctx: RunContext, key: Hotkey, rounds: list[RoundSummary], reporter: Reporter
    ) -> int:
        """Close what can be closed (at most :data:`PER_POLL` rounds read); files removed."""
        run_id, me = ctx.manifest.run_id, key.ss58_address
        now, removed, read = ctx.service.beacon_round(), 0, 0
        latest = max((r.round for r in rounds), default=-1)
        window = ctx.manifest.round.dispute_window_rounds
        games: list[tuple[int, bool]] | None = None
        for summary in rounds:
            index = summary.round
            if index in self.closed or index > latest - KEEP_RECENT or read >= PER_POLL:
                continue
            if not ctx.config.round_dir(index).exists():
                self.closed.add(index)  # never trained here (or already gone)
                continue
            if not prunable(summary.phase, summary.dispute_deadline_round, now, False, True):
                continue
            if games is None:
                games = [
                    (d.round, d.game.outcome is None)
                    for d in ctx.service.disputes(run_id)
                    if d.hotkey == me
                ]
            if any(r == index and open_ for r, open_ in games):
                continue
            read += 1
            detail = ctx.service.round_detail(run_id, index)
            for record in detail.verdicts:
                if record.envelope.body.get("hotkey") == me:
                    self.first_seen.setdefault(record.verdict_id, now)
            reassigned = {(r.round, r.hotkey) for r in ctx.service.reassigned(run_id)}
            if not audits_closed(detail, me, reassigned, self.first_seen, window, now):
                continue
            removed += self._close(ctx, index, reporter)
        return removed

    def _close(self, ctx: RunContext, index: int, reporter: Reporter) -> int:
        """Keep only the round's final checkpoint; drop every round whose successor is
        closed too (this one's predecessor, or this one if the next closed first)."""
        removed = prune_round(ctx.config.round_dir(index))
        self.closed.add(index)
        for old in (index - 1, index):
            workdir = ctx.config.round_dir(old)
            if old in self.closed and old + 1 in self.closed and workdir.exists():
                removed += sum(1 for _ in workdir.glob("ckpt_*.bin"))
                shutil.rmtree(workdir)
        if removed:
            reporter.event("pruned", round=index, checkpoints=removed)
        return removed
