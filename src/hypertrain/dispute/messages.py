"""Bodies of the dispute envelopes, one pydantic model per domain, shared by every end.

* ``dispute-open``: the judged island contests a mismatch verdict on one segment,
  proving the segment's start and end leaves against its committed root.
* ``dispute-answer``: a party's answer to the current query of the game (state hashes
  at the asked steps, section digests of one step, or the operation entries of one
  section), in two messages: first a commitment (``commitment`` set, nothing else),
  then, once both parties committed, the reveal, whose :func:`answer_digest` must be
  the commitment. Nobody sees the other's answer before committing to its own.
* ``dispute-ruling``: a referee's recomputed output digests of the contested operation.

Operation inputs travel as raw bytes (:mod:`hypertrain.dispute.opinputs`), not in an
envelope: they are checked against hashes both parties already signed.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from hypertrain.protocol.canonical import canonical_hash

_HEX64 = r"^[0-9a-f]{64}$"
Hex64 = str
Level = Literal["step", "layer", "op"]
MAX_ENTRIES: Final = 8192  # operations in one section, sections in one step


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LeafProof(_Body):
    """A state hash and its inclusion proof under the island's committed root."""

    leaf: Hex64 = Field(pattern=_HEX64)
    proof: dict[str, Any]


class DisputeOpen(_Body):
    """The judged island contests a mismatch verdict on segment ``segment``."""

    round: int = Field(ge=0)
    verdict_id: str = Field(pattern=_HEX64)
    segment: int = Field(ge=0)
    start: LeafProof  # leaf ``segment``: the state both sides replay from
    end: LeafProof  # leaf ``segment + 1``: what the island claims the segment ends in


class SectionDigest(_Body):
    """One section of a step's trace (a layer's forward, a loss, a backward, the update)."""

    name: str = Field(max_length=64)
    digest: Hex64 = Field(pattern=_HEX64)


class OpEntry(_Body):
    """One operation of a section: its name, non-tensor arguments and tensor digests."""

    op: str = Field(max_length=128)
    args: str = Field(max_length=4096)  # canonical JSON of the arguments, tensors as {"$t": i}
    inputs: list[Hex64] = Field(max_length=64)
    outputs: list[Hex64] = Field(max_length=64)

    def agreed_with(self, other: OpEntry) -> bool:
        """Same operation on the same inputs (outputs may differ)."""
        return (self.op, self.args, self.inputs) == (other.op, other.args, other.inputs)


class DisputeAnswer(_Body):
    """A party's answer to query ``query`` of a dispute, at one level of the game."""

    dispute_id: str = Field(pattern=_HEX64)
    query: int = Field(ge=0)
    level: Level
    segment: int = Field(ge=0)
    step: int | None = Field(default=None, ge=0)  # layer and op levels: the step's offset
    section: int | None = Field(default=None, ge=0)  # op level: the section's index
    hashes: list[Hex64] = Field(default_factory=list, max_length=MAX_ENTRIES)
    sections: list[SectionDigest] = Field(default_factory=list, max_length=MAX_ENTRIES)
    ops: list[OpEntry] = Field(default_factory=list, max_length=MAX_ENTRIES)
    salt: str = Field(default="", pattern=r"^([0-9a-f]{64})?$")  # reveals: a fresh secret
    commitment: str | None = Field(default=None, pattern=_HEX64)  # commitments only

    @property
    def is_commitment(self) -> bool:
        return self.commitment is not None


def answer_digest(body: DisputeAnswer) -> str:
    """What a party commits to: the canonical hash of its salted reveal."""
    return canonical_hash(body.model_dump(mode="json"))


def commitment_of(body: DisputeAnswer) -> DisputeAnswer:
    """The commitment message for a salted reveal (same query, no answer in it)."""
    if not body.salt or body.is_commitment:
        raise ValueError("a commitment is made to a salted reveal")
    return DisputeAnswer(
        dispute_id=body.dispute_id,
        query=body.query,
        level=body.level,
        segment=body.segment,
        step=body.step,
        section=body.section,
        commitment=answer_digest(body),
    )


class DisputeRuling(_Body):
    """A referee's signed recomputation of the contested operation."""

    dispute_id: str = Field(pattern=_HEX64)
    query: int = Field(ge=0)
    inputs_sha256: Hex64 = Field(pattern=_HEX64)
    outputs: list[Hex64] = Field(max_length=64)


DOMAINS: Final[dict[str, type[_Body]]] = {
    "dispute-open": DisputeOpen,
    "dispute-answer": DisputeAnswer,
    "dispute-ruling": DisputeRuling,
}
