"""The tape witnesses' rule as pure functions: is a round's merge tape cleared?

Where the operator requires tape witnesses, the round's tape is judged before its
outcome is booked (:func:`tape_status`, the ``witnesses`` input of
:func:`hypertrain.challenge.rule.decide`): it is *cleared* once that many
distinct keys that hold no other role in the round (not an aggregator key, not a signer
of the round's tapes, on the operator's witness list where it keeps one) attested that
their recomputation of the round's *current* tape agrees, and no such key disagrees. A
tape that is not cleared (``awaiting`` witnesses, or ``contested``: any counted witness
disagrees, which no number of agreeing ones outweighs) holds the whole round's booking,
and no later round trains on a model the witnesses did not clear (:func:`chain_step`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Attestation:
    """One witness's signed word on one tape: its recomputation agrees, or where not."""

    witness: str
    tape_sha256: str
    agrees: bool
    first_difference: str | None = None


@dataclass(frozen=True, slots=True)
class TapeWitnesses:
    """A round's current tape, the attestations on its tapes, and whose word counts."""

    required: int  # agreeing attestations the operator requires (0: none, today's rule)
    tape_sha256: str  # the round's current tape (a correction's, if any)
    attestations: tuple[Attestation, ...] = ()
    barred: frozenset[str] = frozenset()  # aggregator keys and the round's tape signers
    allowed: frozenset[str] = frozenset()  # the operator's witness list (empty: any key)
    # the witness wait since the tape arrived is over (with a list, agreement clears the
    # tape before it only once every listed key answered: no colluder outruns an honest one)
    window_closed: bool = True

    def counts(self, a: Attestation) -> bool:
        """An attestation on the current tape by a key whose word counts."""
        listed = not self.allowed or a.witness in self.allowed
        return a.tape_sha256 == self.tape_sha256 and a.witness not in self.barred and listed


TapeStatus = Literal["not_required", "awaiting", "witnessed", "contested"]


@dataclass(frozen=True, slots=True)
class TapeVerdict:
    """What the witnesses make of a round's current tape."""

    status: TapeStatus = "not_required"
    agreeing: tuple[str, ...] = ()  # counted keys that agree
    disagreeing: tuple[str, ...] = ()  # counted keys that disagree
    first_difference: str | None = None  # the first disagreeing witness's differing field

    @property
    def cleared(self) -> bool:
        """The round may be settled on its tape."""
        return self.status in ("not_required", "witnessed")


def tape_status(witnesses: TapeWitnesses | None) -> TapeVerdict:
    """``witnessed`` once ``required`` distinct counted keys agree and none disagrees (with
    a witness list: and every listed key answered, or the witness wait is over);
    ``contested`` as soon as one counted key disagrees (fail closed); else ``awaiting``."""
    if witnesses is None or witnesses.required <= 0:
        return TapeVerdict()
    counted = sorted(
        (a for a in witnesses.attestations if witnesses.counts(a)), key=lambda a: a.witness
    )
    against = [a for a in counted if not a.agrees]
    agreeing = tuple(
        sorted({a.witness for a in counted if a.agrees} - {a.witness for a in against})
    )
    disagreeing = tuple(a.witness for a in against)
    if against:
        return TapeVerdict("contested", agreeing, disagreeing, against[0].first_difference)
    answered = not witnesses.allowed or witnesses.allowed <= {a.witness for a in counted}
    enough = len(agreeing) >= witnesses.required and (answered or witnesses.window_closed)
    return TapeVerdict("witnessed" if enough else "awaiting", agreeing)


ChainStep = Literal["merged", "skip", "wait"]


def chain_step(verdict: TapeVerdict, now: int, wait_until: int | None) -> ChainStep:
    """What the round after a round opens on, at beacon round ``now`` (``wait_until``:
    the last round of its tape's witness wait; None: the round has no tape).

    ``merged``: its tape is cleared (witnessed, or no witness required), the next round
    continues from the tape's model. ``wait``: the tape is awaiting witnesses or
    contested and ``now`` is not past ``wait_until`` (the tape's arrival plus the
    operator's witness wait): no round opens. ``skip``: the round has no tape, or its
    tape was not cleared in time: the next round opens on the round's own start model,
    so no island ever trains on a model the witnesses did not clear (the round's pay
    still waits for them). A silent witness delays the run by the wait at most, a lying
    one costs one round's model step, never a forged model.
    """
    if wait_until is None:
        return "skip"
    if verdict.cleared:
        return "merged"
    return "wait" if now <= wait_until else "skip"
