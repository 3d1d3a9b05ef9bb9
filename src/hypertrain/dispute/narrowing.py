"""Typed narrowing steps of a dispute game, and their rendering as text for people.

The game appends one :class:`NarrowStep` at each transition that narrows or decides
the disagreement (opened, a step range, a section, an operation, the referee stage, a
re-audit, the decision). Dashboards and ``status`` read these fields; the prose of
:func:`describe` is only ever rendered at the edge, never parsed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Level = Literal["open", "step", "layer", "op", "referee", "recompute", "decided"]
Actor = Literal["island", "auditor", "both", "referee", "auditors", "deadline"]
Outcome = Literal["upheld", "overturned", "held"]


class NarrowStep(BaseModel):
    """One narrowing step: what the disagreement was narrowed to, by whom, until when."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    level: Level
    beacon_round: int
    actor: Actor  # who answered (``both``: both parties' revealed answers)
    lo: int | None = None  # step range (lo, hi]: they agree after lo, differ after hi
    hi: int | None = None
    step: int | None = None
    section: str | None = None
    operation: str | None = None
    op_index: int | None = None
    deadline_round: int | None = None  # when the next answer is due (None once decided)
    outcome: Outcome | None = None
    reason: str = ""  # decided steps only: why, for people


def describe(step: NarrowStep) -> str:
    """One line of text for people (the beacon round is its own field); nothing reads it."""
    at = ""
    if step.level == "open":
        return f"{at}opened on steps ({step.lo}, {step.hi}]"
    if step.level == "step":
        return f"{at}agree after step {step.lo}, differ after step {step.hi}"
    if step.level == "layer":
        return f"{at}step {step.step} first differs in {step.section}"
    if step.level == "op":
        return f"{at}{step.section} operation {step.op_index} ({step.operation}) contested"
    if step.level == "referee":
        return f"{at}waiting for a referee until beacon {step.deadline_round}"
    if step.level == "recompute":
        return f"{at}re-decided by an independent re-audit until beacon {step.deadline_round}"
    return f"{at}{step.outcome}: {step.reason}"
