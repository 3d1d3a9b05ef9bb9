"""Rollback with rebase: the corrected chain is the chain that never saw the faulty update."""

from __future__ import annotations

import hashlib

import pytest

from hypertrain.aggregator.aggregate import earlier_updates
from hypertrain.aggregator.errors import TapeError
from hypertrain.aggregator.merge import MergeInputs, MergeResult, max_tokens, merge
from hypertrain.aggregator.rebase import check_correction, rebase
from hypertrain.aggregator.screen import proven_history
from hypertrain.aggregator.tape import Candidate, Tape
from hypertrain.aggregator.verify import verify_tape
from tests.aggregator.helpers import HOTKEYS, World, put_update

ISLANDS = 4
FAULTY = HOTKEYS[1]


def _candidates(w: World, index: int) -> list[Candidate]:
    out = []
    for i in range(ISLANDS):
        data = put_update(w.blobs, w.manifest, seed=1000 * index + i, scale=1e-3 * (1 + i / 4))
        out.append(
            Candidate(hotkey=HOTKEYS[i], update_sha256=hashlib.sha256(data).hexdigest(),
                      tokens=max_tokens(w.manifest) - 7 * i, update_bytes=len(data), seq=i)
        )  # fmt: skip
    return out


def _chain(w: World, rounds: int, without: str | None = None) -> list[MergeResult]:
    """Merge ``rounds`` rounds in a row (every update audit-proven, screened against the
    earlier rounds' as the aggregator does); ``without`` never offers that island's
    round-0 update."""
    results: list[MergeResult] = []
    start, outer = w.start_sha, None
    for index in range(rounds):
        cands = [c for c in _candidates(w, index) if not (index == 0 and c.hotkey == without)]
        inputs = MergeInputs(
            w.manifest, index, start, outer, cands,
            history_norms=proven_history(reversed([r.tape for r in results])),
            proven=[c.hotkey for c in cands],
            earlier=earlier_updates(reversed([r.tape for r in results]), index),
        )  # fmt: skip
        result = merge(inputs, w.blobs)
        start = w.blobs.put(result.model_blob, kind="model", round=index)
        outer = w.blobs.put(result.outer_blob, kind="outer_state", round=index)
        results.append(result)
    return results


@pytest.mark.parametrize("later", [1, 3])
def test_rebase_equals_the_chain_that_never_included_the_update(later: int) -> None:
    w = World(momentum=0.9)
    merged = _chain(w, later + 1)
    never = _chain(w, later + 1, without=FAULTY)
    chain = [r.tape for r in merged]
    corrections = rebase(chain, {0: {FAULTY}}, w.blobs)
    assert [c.supersedes.sha256() for c in corrections] == [t.sha256() for t in chain]
    for fixed, want in zip(corrections, never, strict=True):
        assert fixed.result.model_blob == want.model_blob  # bitwise
        assert fixed.result.outer_blob == want.outer_blob
        assert fixed.result.tape.included == want.tape.included
        assert fixed.result.tape.history_norms == want.tape.history_norms
        assert fixed.result.tape.rollback_of == fixed.supersedes.sha256()
    assert merged[-1].model_blob != never[-1].model_blob  # the fault did move the model
    assert FAULTY in {e.hotkey for e in corrections[0].result.tape.excluded}
    assert all(FAULTY in {i.hotkey for i in c.result.tape.included} for c in corrections[1:])


def test_a_corrected_tape_verifies_and_a_different_one_is_caught() -> None:
    w = World()
    chain = [r.tape for r in _chain(w, 3)]
    corrections = rebase(chain, {0: {FAULTY}}, w.blobs)
    for c in corrections:  # publish what the replay reads
        w.blobs.put(c.result.model_blob, kind="model", round=c.result.tape.round)
        w.blobs.put(c.result.outer_blob, kind="outer_state", round=c.result.tape.round)
    published = [c.result.tape for c in corrections]
    assert all(verify_tape(t, w.blobs).identical for t in published)
    assert check_correction(chain, {0: {FAULTY}}, published, w.blobs) is None
    doc = published[2].model_dump(mode="json")
    forged = Tape.model_validate({**doc, "new_model_sha256": "ab" * 32})
    diff = check_correction(chain, {0: {FAULTY}}, [*published[:2], forged], w.blobs)
    assert diff is not None and diff.startswith("round 2: tape.new_model_sha256")
    short = check_correction(chain, {0: {FAULTY}}, published[:1], w.blobs)
    assert short is not None and "recomputed [0, 1, 2]" in short


def test_rounds_before_the_fault_and_a_clean_chain_are_left_alone() -> None:
    w = World()
    chain = [r.tape for r in _chain(w, 3)]
    corrections = rebase(chain, {1: {FAULTY}}, w.blobs)
    assert [c.supersedes.round for c in corrections] == [1, 2]
    assert rebase(chain, {}, w.blobs) == []


def test_rebase_refuses_a_bad_chain_or_an_unknown_update() -> None:
    w = World()
    chain = [r.tape for r in _chain(w, 2)]
    with pytest.raises(TapeError, match="at least"):
        rebase([], {0: {FAULTY}}, w.blobs)
    with pytest.raises(TapeError, match="increasing round order"):
        rebase([chain[1], chain[0]], {0: {FAULTY}}, w.blobs)
    with pytest.raises(TapeError, match="no update among round 0"):
        rebase(chain, {0: {"5" * 48}}, w.blobs)
    with pytest.raises(TapeError, match="no update among round 7"):
        rebase(chain, {7: {FAULTY}}, w.blobs)
