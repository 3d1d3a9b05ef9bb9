"""The public chain read from round records: which outer state a merge continues.

The records are stood in for by small fakes holding exactly what
:func:`hypertrain.aggregator.chain.previous_outer` reads: each round's start model, in an
open record the run's coordinator signs, and its current merge (its latest correction's
tape, else the merge). The chain reads every open record verified through
``hypertrain.evidence``: a forged, unsigned or misplaced one, or a run that names no
coordinator, is refused with a typed error, never read as the chain's start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from hypertrain.aggregator import chain
from hypertrain.evidence.errors import CoordinatorError, VerificationError
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import MergeTape
from tests.aggregator.helpers import RUN_ID, manifest

M0, M1, M2, M1C = (f"{n:064x}" for n in (10, 11, 12, 21))  # M1C: round 0 corrected
COORDINATOR = Hotkey.from_seed(b"\x61" * 32)
FORGER = Hotkey.from_seed(b"\x62" * 32)
MANIFEST = manifest().model_copy(update={"coordinator": COORDINATOR.ss58_address})


def _opened(index: int, start: str, key: Hotkey = COORDINATOR, run_id: str = RUN_ID) -> Envelope:
    body = {"round": index, "start_model_sha256": start, "start_model_url": f"u{index}",
            "beacon_round": 0, "assignment_key": "0" * 64, "roster": [],
            "commit_deadline_round": 0}  # fmt: skip
    return seal(key, domain="round-open", run_id=run_id, body=body, expiry_round=10**6)


@dataclass
class _Detail:
    """A round's signed open record (its start model) and its current merge (or None)."""

    round: int
    start: str
    merged: tuple[str, str, str] | None  # (start, new model, outer state)
    open: Envelope = field(init=False)

    def __post_init__(self) -> None:
        self.open = _opened(self.round, self.start)

    def current_merge(self) -> MergeTape | None:
        if self.merged is None:
            return None
        start, new, outer = self.merged
        return MergeTape.model_construct(
            start_model_sha256=start, new_model_sha256=new, outer_state_sha256=outer,
            new_model_url="merged",
        )  # fmt: skip


def _rounds(*rows: tuple[str, tuple[str, str, str] | None]) -> list[_Detail]:
    return [_Detail(index, start, merged) for index, (start, merged) in enumerate(rows)]


def _outer(details: list[_Detail], index: int, m: Any = MANIFEST) -> str | None:
    return chain.previous_outer(lambda i: details[i], index, m)  # type: ignore[arg-type, return-value]


def test_a_merge_continues_its_predecessors_outer_state() -> None:
    details = _rounds((M0, (M0, M1, "o0")), (M1, (M1, M2, "o1")), (M2, None))
    assert (_outer(details, 1), _outer(details, 2)) == ("o0", "o1")


def test_a_round_left_out_of_the_chain_is_skipped() -> None:
    """Round 1 opened on round 0's start (round 0's tape was not cleared in time)."""
    details = _rounds((M0, (M0, M1, "o0")), (M0, None))
    assert _outer(details, 1) is None


def test_a_corrected_round_after_one_that_merged_nothing_continues_it() -> None:
    """Round 1 merged nothing (its model is its start, M1), so round 2 opened on M1 too.
    Round 0's correction moved the chain to M1C: rounds 1 and 2 were replayed onto it,
    and corrected round 2 continues corrected round 1's outer state (the rebase's),
    not round 0's, though round 1 opened on the same model as round 2."""
    details = _rounds(
        (M0, (M0, M1C, "o0c")),
        (M1, (M1C, M1C, "o1c")),  # corrected: it still merges nothing
        (M1, (M1C, M2, "o2c")),
    )
    assert _outer(details, 2) == "o1c"


def test_the_latest_model_is_the_newest_merge_else_the_first_verified_start() -> None:
    details = _rounds((M0, (M0, M1, "o0")), (M1, None))
    detail_of = details.__getitem__
    assert chain.latest_model(detail_of, [0, 1], MANIFEST) == (M1, "merged")  # type: ignore[arg-type]
    unmerged = _rounds((M0, None))
    assert chain.latest_model(unmerged.__getitem__, [0], MANIFEST) == (M0, "u0")  # type: ignore[arg-type]


def _doctored(envelope: Envelope) -> list[_Detail]:
    """Round 0 merged, round 1 not: its open record replaced by ``envelope``."""
    details = _rounds((M0, (M0, M1, "o0")), (M1, None))
    details[1].open = envelope
    return details


@pytest.mark.parametrize(
    ("record", "refusal"),
    [
        (_opened(1, M1, key=FORGER), "signed by"),  # a well-formed record another key signed
        (_opened(0, M1), "for round 0, not 1"),  # the coordinator's record of another round
        (_opened(1, M1, run_id="run-2"), "refused"),  # the coordinator's, of another run
    ],
    ids=["forged", "another_round", "another_run"],
)
def test_an_open_record_the_coordinator_did_not_sign_for_the_round_is_refused(
    record: Envelope, refusal: str
) -> None:
    details = _doctored(record)
    with pytest.raises(VerificationError, match=refusal):
        _outer(details, 1)
    with pytest.raises(VerificationError, match=refusal):
        chain.start_model(details[1], MANIFEST)  # type: ignore[arg-type]


def test_an_unsigned_open_record_is_refused() -> None:
    honest = _opened(1, M1)
    unsigned = honest.model_copy(update={"signature": "00" * 64})
    with pytest.raises(VerificationError, match="refused"):
        _outer(_doctored(unsigned), 1)
    assert _outer(_doctored(honest), 1) == "o0"  # the same record, signed: it continues o0


def test_a_run_without_a_coordinator_is_refused_with_a_typed_error() -> None:
    """A manifest naming no coordinator: no open record can be checked, so the chain
    refuses (:class:`CoordinatorError`) instead of reading them unverified; the records
    are untouched and verify against the named coordinator."""
    details = _rounds((M0, (M0, M1, "o0")), (M1, None))
    nobody = MANIFEST.model_copy(update={"coordinator": ""})
    with pytest.raises(CoordinatorError, match="names no coordinator"):
        _outer(details, 1, nobody)
    with pytest.raises(CoordinatorError):
        chain.latest_model(details.__getitem__, [1], nobody)  # type: ignore[arg-type]
    assert _outer(details, 1) == "o0"
