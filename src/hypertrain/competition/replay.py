"""A cycle's standings as a pure function of its public record, for the service and anyone.

The service settles a cycle with :func:`cycle_results` over the task it published
and the scores evaluators signed; :func:`replay_cycle` takes the cycle's public
record (``GET /v1/competitions/<id>/cycles/<k>``), verifies every score envelope and
every revealed page against the committed pool root, and recomputes the same
standings, so a reader can check the ranks and the units the ledger was paid.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from hypertrain.competition.messages import (
    SCORE_DOMAIN,
    CompeteScore,
    CycleRecord,
    CycleResult,
    CycleTask,
    decode_losses,
)
from hypertrain.competition.pool import verified_pages
from hypertrain.competition.scoring import Entry, standings
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.protocol.envelope import open_envelope


def agreed_losses(scores: Iterable[tuple[str, str, str]]) -> dict[str, str | None]:
    """model hash -> the losses every evaluator reported, or None where two disagree.

    ``scores`` holds ``(model hash, evaluator, losses hex)``; a missing answer is no
    score, never a pass.
    """
    out: dict[str, str | None] = {}
    for model_sha, _, losses in sorted(scores, key=lambda s: (s[1], s[0])):
        seen = out.setdefault(model_sha, losses)
        if seen is not None and seen != losses:
            out[model_sha] = None
    return out


def _finite_mean(losses: tuple[float, ...]) -> float | None:
    mean = sum(losses) / len(losses) if losses else math.inf
    return mean if math.isfinite(mean) else None


def cycle_results(
    spec: CompetitionSpec, task: CycleTask, agreed: dict[str, str | None]
) -> list[CycleResult]:
    """Standings of a cycle from its task and its agreed losses, best first."""
    entries = [
        Entry(m.hotkey, m.model_sha256, m.commit_beacon_round, m.commit_seq,
              decode_losses(losses))
        for m in task.listed()
        if (losses := agreed.get(m.model_sha256)) is not None
    ]  # fmt: skip
    table = standings(
        entries, spec.epsilon, task.beacon_round,
        temperature=spec.reward.temperature, units=spec.reward.weight_units,
        winner_share=spec.reward.winner_share, baseline_loss=spec.reward.baseline_loss,
        references=frozenset(m.model_sha256 for m in task.references),
    )  # fmt: skip
    mean = {e.model_sha: _finite_mean(e.losses) for e in entries}
    return [
        CycleResult(
            hotkey=s.hotkey, model_sha256=s.model_sha, mean_loss=mean[s.model_sha],
            wins=s.wins, comparisons=s.comparisons, win_rate=s.win_rate, weight=s.weight,
            units=s.units, counted=s.counted,
        )
        for s in table
    ]  # fmt: skip


def replay_cycle(spec: CompetitionSpec, record: CycleRecord) -> list[CycleResult]:
    """Verify a cycle's public record and recompute its standings (raises ValueError)."""
    task = record.task
    verified_pages(spec, task.pages, [p.tokens for p in task.revealed],
                   [p.proof.proof() for p in task.revealed])  # fmt: skip
    if [p.position for p in task.revealed] != task.pages:
        raise ValueError("the revealed pages are not the task's pages")
    rows = []
    for raw in record.scores:
        env = open_envelope(raw, domain=SCORE_DOMAIN, run_id=spec.competition_id)
        body = CompeteScore.model_validate(env.body)
        if body.cycle != task.cycle or body.pages_key != task.pages_key:
            raise ValueError(f"a score by {env.signer} is not for this cycle")
        if spec.evaluators and env.signer not in spec.evaluators:
            raise ValueError(f"{env.signer} is not an evaluator the spec names")
        rows.append((body.model_sha256, env.signer, body.losses_f32))
    return cycle_results(spec, task, agreed_losses(rows))
