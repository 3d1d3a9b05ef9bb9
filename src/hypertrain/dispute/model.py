"""The dispute game's state: the manifest's rules a game needs and the record of one game.

A :class:`Game` is immutable and stored as JSON by the service; every transition that
returns a new one is :mod:`hypertrain.dispute.game` (the parties' answers, the narrowing,
the decision) or :mod:`hypertrain.dispute.resolution` (rulings, deadlines, re-audits).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hypertrain.dispute.errors import NotAPartyError
from hypertrain.dispute.messages import DisputeAnswer, OpEntry
from hypertrain.dispute.narrowing import NarrowStep

Party = Literal["island", "auditor"]
Stage = Literal["step", "layer", "op", "referee", "recompute", "decided"]
Outcome = Literal["upheld", "overturned", "held"]
PARTIES: tuple[Party, Party] = ("island", "auditor")


class Rules(BaseModel):
    """The manifest's dispute rules that the game itself needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fanout: int = Field(default=1, ge=1, le=255)
    answer_rounds: int = Field(default=10, ge=1)
    referee_rounds: int = Field(default=10, ge=1)
    clock_rounds: int = Field(default=60, ge=1)
    referee_extensions: int = Field(default=2, ge=0)

    def bound_rounds(self) -> int:
        """The most beacon rounds one game can hold its round's settlement."""
        return 2 * self.clock_rounds + self.referee_rounds * (1 + self.referee_extensions)


class Game(BaseModel):
    """One dispute's whole state; stored as JSON by the service."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dispute_id: str
    run_id: str
    round: int
    segment: int
    island: str
    auditor: str
    interval: int = Field(ge=1)  # J
    sections: tuple[str, ...]
    start_hash: str
    island_end: str
    rules: Rules
    stage: Stage = "step"
    check: Literal["segment", "start", "update", "unverifiable"] = "segment"  # what it found
    query: int = 0
    deadline_round: int  # the open phase's deadline (each party's clock may end it sooner)
    phase_opened: int = 0  # beacon round the open phase began
    lo: int = 0
    hi: int
    points: tuple[int, ...]
    commitments: dict[str, str] = Field(default_factory=dict)
    answers: dict[str, DisputeAnswer] = Field(default_factory=dict)
    clock_used: dict[str, int] = Field(default_factory=dict)
    extensions: int = 0
    step: int | None = None
    section: int | None = None
    op_index: int | None = None
    op: OpEntry | None = None
    outputs: dict[str, list[str]] = Field(default_factory=dict)
    inputs_sha256: str | None = None
    outcome: Outcome | None = None
    reason: str = ""
    steps: tuple[NarrowStep, ...] = ()
    messages: int = 1  # accepted messages, the opening one included
    # a ``recompute`` game: the listed auditors whose re-audits count (never the verdict's
    # auditor nor the island), fixed at opening, and each one's first re-audit result
    jury: tuple[str, ...] = ()
    reaudits: dict[str, str] = Field(default_factory=dict)
    # the jurors a deadline decision counted (the live ones); empty: the whole jury
    counted: tuple[str, ...] = ()

    def role_of(self, signer: str) -> Party:
        if signer == self.island:
            return "island"
        if signer == self.auditor:
            return "auditor"
        raise NotAPartyError(f"{signer} is not a party to dispute {self.dispute_id[:16]}")

    @property
    def revealing(self) -> bool:
        """Both parties committed to the open query: reveals are due."""
        return len(self.commitments) == len(PARTIES)

    def party_deadline(self, party: Party) -> int:
        """The last beacon round at which ``party`` may send its due message."""
        left = self.rules.clock_rounds - self.clock_used.get(party, 0)
        return min(self.deadline_round, self.phase_opened + max(left, 0))

    def due(self, party: Party) -> bool:
        """Whether ``party`` owes a message in the open phase."""
        if self.stage not in ("step", "layer", "op"):
            return False
        return party not in (self.answers if self.revealing else self.commitments)


def section_names(num_layers: int, micro_batches: int) -> tuple[str, ...]:
    """The sections of one step's trace, in execution order (see module docstring)."""
    per_mb = [f"layers.{i}" for i in range(num_layers)] + ["logits", "loss", "backward"]
    return (*(f"mb{m}.{s}" for m in range(micro_batches) for s in per_mb), "update")


def midpoints(lo: int, hi: int, fanout: int) -> tuple[int, ...]:
    """Up to ``fanout`` evenly spaced steps strictly between ``lo`` and ``hi``."""
    span = hi - lo
    return tuple(sorted({lo + span * i // (fanout + 1) for i in range(1, fanout + 1)} - {lo, hi}))
