"""A witness follows the corrected chain: the records it kept of earlier rounds never
stand in for their current tapes (against the real service, in process).

The witness checks a tape's ``prev_outer_state_sha256`` against the chain's previous
outer state (:func:`~hypertrain.aggregator.chain.previous_outer`), read from the round
records. It reads a round afresh when that round's own tape is new to it, and kept the
earlier rounds as first read: once a rebase corrected rounds ``r`` and ``r + 1`` before
its next poll, it attested ``r + 1``'s corrected tape (newest first) against round
``r``'s superseded outer state and contested the honest correction (seen in
``hypertrain devnet --scenario rollback``: round 2's corrected tape contested on
``tape.prev_outer_state_sha256``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.witness import Witness
from hypertrain.api.client import ChallengeClient
from hypertrain.api.models import RoundSummary
from tests.aggregator.service_chain import client_for, prove, train, two_merged_rounds
from tests.challenge.conftest import Harness


class HookedClient(ChallengeClient):
    """The service's client; ``after_list`` runs once right after a rounds list is read
    (a correction that lands between the witness's list and its reads)."""

    after_list: Callable[[], object] | None = None

    def rounds(self, run_id: str) -> list[RoundSummary]:
        listed = super().rounds(run_id)
        hook, self.after_list = self.after_list, None
        if hook is not None:
            hook()
        return listed


def _witness(h: Harness, blobs: MemoryBlobs, events: list[Any]) -> Witness:
    """A witness under a registered key that is no island of the run."""
    return Witness(client_for(h, HookedClient), blobs, h.miners[3], "run-1", events.append)


def _attested(events: list[Any]) -> list[tuple[int, bool, str | None]]:
    return [(e["round"], e["agrees"], e["first_difference"])
            for e in events if e["event"] == "attested"]  # fmt: skip


def _drain(witness: Witness, manifest: Any) -> None:
    while witness.step(manifest):
        pass


@pytest.mark.parametrize(("merged", "faulty"), [(2, 0), (4, 1)])
def test_the_witness_agrees_with_every_corrected_round_of_a_rebase(
    harness: Harness, tmp_path: Path, merged: int, faulty: int
) -> None:
    """Rounds ``0..merged-1`` merged and witnessed; a fault of round ``faulty`` is proven
    and the rebase corrects it and every later round in one pass; the witness then
    attests the corrected tapes, newest first, and agrees with each."""
    h, agg, blobs, events = two_merged_rounds(harness, tmp_path)
    m = agg.service.manifest("run-1")
    for index in range(2, merged):
        train(h, agg, m, blobs, index)
    seen: list[Any] = []
    witness = _witness(h, blobs, seen)
    _drain(witness, m)
    assert _attested(seen) == [(w, True, None) for w in reversed(range(merged))]
    seen.clear()
    prove(h, faulty, h.miners[1].ss58_address)
    agg.step(m, open_rounds=False)
    corrected = list(range(faulty, merged))
    assert [e["rounds"] for e in events if e["event"] == "rolled_back"] == [corrected]
    _drain(witness, m)
    assert _attested(seen) == [(w, True, None) for w in reversed(corrected)]


def test_a_correction_between_the_list_and_the_reads_is_read_afresh(
    harness: Harness, tmp_path: Path
) -> None:
    """The witness lists round 2's new tape; before it reads the round, the rebase
    corrects rounds 0 to 2. It attests nothing from that torn view (round 1 as listed
    is not round 1 as round 2's corrected tape continues it), and at its next step
    agrees with every corrected round."""
    h, agg, blobs, events = two_merged_rounds(harness, tmp_path)
    m = agg.service.manifest("run-1")
    seen: list[Any] = []
    witness = _witness(h, blobs, seen)
    _drain(witness, m)  # rounds 1 and 0, as merged
    train(h, agg, m, blobs, 2)
    prove(h, 0, h.miners[1].ss58_address)
    assert isinstance(witness.service, HookedClient)
    witness.service.after_list = lambda: agg.step(m, open_rounds=False)
    seen.clear()
    assert witness.step(m) == 0
    assert [e["rounds"] for e in events if e["event"] == "rolled_back"] == [[0, 1, 2]]
    assert not _attested(seen)
    _drain(witness, m)
    assert _attested(seen) == [(2, True, None), (1, True, None), (0, True, None)]
