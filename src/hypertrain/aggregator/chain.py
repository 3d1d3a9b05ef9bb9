"""The public chain of merged models, read from the round records alone.

A round opens on its predecessor's merged model, or (where the operator requires tape
witnesses and the predecessor's tape was not cleared in time) on the predecessor's own
start model: that merge is left out of the chain (docs/mechanism.md, "Tape
witnesses"). The aggregator and the witness both follow the chain from the records, so
the outer state a merge continues and the updates already merged are public facts:
:func:`previous_outer` and :func:`merged_updates`. Every record is read verified through
:mod:`.records` (:mod:`hypertrain.evidence`): a round-open record the run's coordinator
did not sign for its run and round raises
:class:`~hypertrain.evidence.errors.VerificationError`, and a run whose manifest names no
coordinator :class:`~hypertrain.evidence.errors.CoordinatorError`, before anything is
merged on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypertrain.aggregator.records import checked_commits, round_open
from hypertrain.api.models import RoundDetail
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import Commit, MergeCorrection, MergeTape

DetailOf = Callable[[int], RoundDetail]


def start_model(detail: RoundDetail, manifest: RunManifest) -> str:
    """The start model the round's open record names, verified as the coordinator's
    record of this run and round (:func:`.records.round_open`)."""
    return round_open(detail, manifest, detail.round).start_model_sha256


def chain_start(detail: RoundDetail, manifest: RunManifest) -> str:
    """The model the round continues: its current merge's start (a correction moves it
    onto the corrected chain), else the start its verified open record names."""
    merged = detail.current_merge()
    return merged.start_model_sha256 if merged is not None else start_model(detail, manifest)


def previous_outer(detail_of: DetailOf, index: int, manifest: RunManifest) -> str | None:
    """Outer-state hash of the merge round ``index`` continues (None: zero momentum).

    Walking back, the latest merge is taken unless its round was left out of the chain:
    the round started from the same model as ``index`` and its merge's model is another.
    Starts are :func:`chain_start`: a corrected round continues its corrected
    predecessor even where the original round merged nothing (it then opened on the
    same model as its predecessor, whose correction moved both).
    """
    start = chain_start(detail_of(index), manifest)
    for w in range(index - 1, -1, -1):
        detail = detail_of(w)
        merged = detail.current_merge()
        if merged is None:
            continue
        if merged.new_model_sha256 == start or chain_start(detail, manifest) != start:
            return merged.outer_state_sha256
    return None


def latest_model(
    detail_of: DetailOf, indices: Sequence[int], manifest: RunManifest
) -> tuple[str, str]:
    """(hash, URL) of the model the chain of rounds ``indices`` ends on: the newest current
    merge's (a corrected round continues from its correction), else the start the first
    round's verified open record names."""
    for index in reversed(indices):
        tape = detail_of(index).current_merge()
        if tape:
            return tape.new_model_sha256, tape.new_model_url
    opened = round_open(detail_of(indices[0]), manifest, indices[0])
    return opened.start_model_sha256, opened.start_model_url


MergedMemo = dict[tuple[int, bool, int], frozenset[str]]  # (round, merged, corrections) -> set


def merged_updates(
    detail_of: DetailOf, index: int, manifest: RunManifest, memo: MergedMemo | None = None
) -> frozenset[str]:
    """Update hashes that a tape of a round before ``index`` included: the public
    form of ``stale_update`` (each island's signed commit names its update). With
    ``memo``, a round's set is verified once per set of tapes it has (its merge and
    corrections; a closed round's commits never change), not once per later round."""
    out: set[str] = set()
    for w in range(index):
        detail = detail_of(w)
        key = (w, detail.merge is not None, len(detail.corrections))
        found = memo.get(key) if memo is not None else None
        if found is None:
            included = {h for tape in _tapes(detail) for h in tape.included}
            signed = signed_commits(detail, manifest, w)
            found = frozenset(body.update_sha256 for signer, body in signed if signer in included)
            if memo is not None:
                memo[key] = found
        out.update(found)
    return frozenset(out)


def signed_commits(
    detail: RoundDetail, manifest: RunManifest, index: int
) -> list[tuple[str, Commit]]:
    """The round's commits that verify for round ``index`` (:mod:`.records`, through
    evidence), as (signer, body), in record order; collection excludes the others."""
    out: list[tuple[str, Commit]] = []
    for checked in checked_commits(detail, manifest, index):
        body = checked.verified
        if body is not None:
            out.append((checked.hotkey, body))
    return out


def _tapes(detail: RoundDetail) -> list[MergeTape]:
    tapes = [MergeTape.model_validate(detail.merge.body)] if detail.merge else []
    return tapes + [MergeCorrection.model_validate(c.body).tape for c in detail.corrections]
