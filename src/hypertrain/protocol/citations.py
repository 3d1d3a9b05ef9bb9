"""Which proven faults a ``merge-correction`` of a round cites: one rule for both ends.

A rollback corrects a chain of merged rounds: the round whose update is proven faulty,
then every later round replayed onto the corrected model. The correction of round ``r``
cites the proven faults it answers: the faults of round ``r`` itself, and those of
earlier rounds whose correction moved ``r``'s start model; never a fault of a later
round (that round's own correction cites it). The aggregator picks each correction's
citations with :func:`cited_by`; the challenge service refuses a citation that
:func:`may_cite` does not allow, so the two cannot drift, and two or more faults due at
once are corrected in one pass (each round citing its share).
"""

from __future__ import annotations

from collections.abc import Iterable

from hypertrain.protocol.messages import FaultRef


def may_cite(fault_round: int, corrected_round: int) -> bool:
    """Whether a correction of ``corrected_round`` may cite a fault of ``fault_round``."""
    return fault_round <= corrected_round


def cited_by(faults: Iterable[FaultRef], corrected_round: int) -> list[FaultRef]:
    """The faults among ``faults`` that a correction of ``corrected_round`` cites, in order."""
    return [f for f in faults if may_cite(f.round, corrected_round)]
