"""The tape rule as a table: the witnesses' verdict on a round's tape, what the settlement
rule does with a tape they have not cleared, and what the next round opens on."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from hypertrain.aggregator.tape import Excluded
from hypertrain.challenge.rule import decide
from hypertrain.challenge.tape_rule import (
    Attestation,
    TapeVerdict,
    TapeWitnesses,
    chain_step,
    tape_status,
)
from tests.challenge.rule_cases import COMMITS, A, B
from tests.challenge.rule_cases import merge_tape as _tape

TAPE, OLD = "dd" * 32, "ee" * 32  # the round's current tape, and one a correction superseded
W1, W2, AGG = "witness-1", "witness-2", "aggregator"
DIFF = "tape.excluded[0].reason: tape says 'near_duplicate', recomputed 'none'"


def _yes(witness: str, tape: str = TAPE) -> Attestation:
    return Attestation(witness, tape, True)


def _no(witness: str, tape: str = TAPE) -> Attestation:
    return Attestation(witness, tape, False, DIFF)


def _w(
    required: int, *given: Attestation, allowed: frozenset[str] = frozenset(), closed: bool = True
) -> TapeWitnesses:
    return TapeWitnesses(required, TAPE, given, frozenset({AGG}), allowed, closed)


# (witnesses on the round's tape) -> the witnesses' verdict on it
WITNESSED: list[tuple[str, TapeWitnesses | None, TapeVerdict]] = [
    ("no requirement: today's rule", None, TapeVerdict()),
    ("a requirement of 0 ignores the words", _w(0, _no(W1)), TapeVerdict()),
    ("required and nobody attested: awaiting", _w(1), TapeVerdict("awaiting")),
    ("one agreeing witness of one required", _w(1, _yes(W1)), TapeVerdict("witnessed", (W1,))),
    ("one of two required: awaiting", _w(2, _yes(W1)), TapeVerdict("awaiting", (W1,))),
    ("two distinct keys of two", _w(2, _yes(W2), _yes(W1)),
     TapeVerdict("witnessed", (W1, W2))),
    ("one key twice counts once", _w(2, _yes(W1), _yes(W1)), TapeVerdict("awaiting", (W1,))),
    ("one disagreement contests, whatever agrees", _w(1, _yes(W1), _no(W2)),
     TapeVerdict("contested", (W1,), (W2,), DIFF)),
    ("a key that says both is a disagreement", _w(1, _yes(W1), _no(W1)),
     TapeVerdict("contested", (), (W1,), DIFF)),
    ("the aggregator key's word does not count", _w(1, _yes(AGG)), TapeVerdict("awaiting")),
    ("nor its disagreement", _w(1, _yes(W1), _no(AGG)), TapeVerdict("witnessed", (W1,))),
    ("a superseded tape's attestations do not count", _w(1, _yes(W1, OLD), _no(W2, OLD)),
     TapeVerdict("awaiting")),
    ("off the operator's list, a word does not count",
     _w(1, _yes(W1), _no(W2), allowed=frozenset({W1})), TapeVerdict("witnessed", (W1,))),
    ("listed: agreement waits for every listed key", _w(1, _yes(W1), allowed=frozenset({W1, W2}),
     closed=False), TapeVerdict("awaiting", (W1,))),
    ("listed: every listed key agreed", _w(1, _yes(W1), _yes(W2), allowed=frozenset({W1, W2}),
     closed=False), TapeVerdict("witnessed", (W1, W2))),
    ("listed: a silent one waits the wait out", _w(1, _yes(W1), allowed=frozenset({W1, W2})),
     TapeVerdict("witnessed", (W1,))),
    ("listed: the slower honest one still contests", _w(1, _yes(W1), _no(W2),
     allowed=frozenset({W1, W2}), closed=False), TapeVerdict("contested", (W1,), (W2,), DIFF)),
    ("a liar dropped from the list releases the contest",
     _w(1, _no(W2), _yes(W1), allowed=frozenset({W1})), TapeVerdict("witnessed", (W1,))),
]  # fmt: skip


@pytest.mark.parametrize(("case", "given", "expected"), WITNESSED, ids=[c[0] for c in WITNESSED])
def test_tape_status(case: str, given: TapeWitnesses | None, expected: TapeVerdict) -> None:
    assert tape_status(given) == expected, case


def test_decide_holds_the_round_on_a_tape_the_witnesses_have_not_cleared() -> None:
    """The outcome is computed as ever; only its tape verdict says whether it is booked."""
    plain = decide(COMMITS, _tape([A, B]), [])
    for witnesses, cleared in [(_w(1), False), (_w(1, _yes(W1), _no(W2)), False),
                               (_w(1, _yes(W1)), True), (None, True)]:  # fmt: skip
        got = decide(COMMITS, _tape([A, B]), [], witnesses=witnesses)
        assert got.tape.cleared is cleared
        assert (got.accepted, got.held, got.faults) == (plain.accepted, plain.held, plain.faults)
    no_tape = decide(COMMITS, None, [], witnesses=_w(1))
    assert no_tape.tape.cleared  # nothing merged: nothing to witness, nothing paid
    other = _tape([A, B]).model_copy(update={"tape_sha256": OLD})
    unjudged = decide(COMMITS, other, [], witnesses=_w(1, _yes(W1)))
    assert unjudged.tape.status == "awaiting"  # paid on a tape the witnesses did not judge


@pytest.mark.parametrize("reason", ["audit-mismatch", "missing blob", "", "MALFORMED"])
def test_a_misspelt_exclusion_reason_is_refused_on_both_sides(reason: str) -> None:
    with pytest.raises(ValidationError):
        _tape([B], {A: reason})
    with pytest.raises(ValidationError):
        Excluded(hotkey=A, update_sha256="ee" * 32, tokens=1, stage="screen", reason=reason)


# (the round's tape verdict, whether it has a tape, now, wait until) -> what the next round opens on
CHAIN: list[tuple[str, TapeVerdict, bool, int, str]] = [
    ("no witness required: its model at once", TapeVerdict(), True, 0, "merged"),
    ("witnessed: its model", TapeVerdict("witnessed", (W1,)), True, 5, "merged"),
    ("awaiting, within the wait: no round opens", TapeVerdict("awaiting"), True, 10, "wait"),
    ("awaiting at the wait's last round: still waits", TapeVerdict("awaiting"), True, 20, "wait"),
    ("silent past the wait: its start model", TapeVerdict("awaiting"), True, 21, "skip"),
    ("contested, within the wait: waits", TapeVerdict("contested", (), (W2,), DIFF), True, 10,
     "wait"),
    ("contested past the wait: never its model", TapeVerdict("contested", (W1,), (W2,), DIFF),
     True, 99, "skip"),
    ("no tape (nobody committed): its start model", TapeVerdict(), False, 0, "skip"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "verdict", "has_tape", "now", "expected"), CHAIN,
                         ids=[c[0] for c in CHAIN])  # fmt: skip
def test_chain_step(
    case: str, verdict: TapeVerdict, has_tape: bool, now: int, expected: str
) -> None:
    assert chain_step(verdict, now, wait_until=20 if has_tape else None) == expected, case
