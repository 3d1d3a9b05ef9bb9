"""Which commitments a cycle lists: each hotkey's newest model, and the references.

A hotkey's newer commitment does not take its older model out of the order at once.
An older model (first of its model hash, revealed, eligible) stays listed as a
*reference* while both hold:

1. it is not *junk*: it counted in some settled cycle that scored it, or was never
   scored yet, and
2. it stands in front of somebody: a hotkey's newest model that never counted in a
   settled cycle (or was never scored) was committed after it, no later than the first
   round after it that holds a model which ever counted. That is a model whose bar (the
   newest counted round before it) is this one, and which would be judged against the
   rounds before it, or nothing, if it left.

A model's verdict (``Candidate.counted``) is whether it *ever* counted, not whether it
counted in the latest cycle: a cycle's pages are a sample, and one sample whose pages
favour an older model must not take a reference out of the order for good (the copy
behind it would then face the older bar, count, and take the leader's place). A
model that once counted stays one that counted; a reference therefore leaves only on
an event of the record that holds across cycles: a model committed behind it counted
(it beat the bar), its hotkey's successor counted with no never-counted model
between, or the never-counted models behind it are replaced or deregister.

References are scored and filtered like any model (docs/competition.md, "Winning"): a
later commitment must beat them by epsilon, whether or not they count that cycle, and a
hotkey is paid for its newest model that counts, so a reference earns only while its
hotkey's newer model does not count.
Every reference stands in front of a never-counted newest model, in the stretch before
the next round holding a model that ever counted, so there are never more references
than the counted models of the rounds just before the cycle's never-counted models, and
none once every newest model has counted. Of several commitments of one hotkey in one
beacon round only the last is listed (none of them is older than another). A pure
function of the commitments and verdicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Candidate:
    """An eligible commitment: who, its model, its place in the order, its last verdict."""

    hotkey: str
    model_sha: str
    commit_round: int
    seq: int
    counted: bool | None = None  # in any settled cycle that scored it; None: never scored

    @property
    def order(self) -> tuple[int, int]:
        return (self.commit_round, self.seq)


def _last_per_round(candidates: Sequence[Candidate]) -> list[Candidate]:
    last: dict[tuple[str, int], Candidate] = {}
    for c in sorted(candidates, key=lambda c: c.order):
        last[(c.hotkey, c.commit_round)] = c
    return sorted(last.values(), key=lambda c: c.order)


def split(candidates: Sequence[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """(each hotkey's newest candidate, the references), both oldest first."""
    listed = _last_per_round(candidates)
    newest = {c.hotkey: c for c in listed}
    entries = [c for c in listed if newest[c.hotkey] is c]
    behind = [e for e in entries if e.counted is not True]  # never counted: may need a bar
    counted_rounds = sorted({c.commit_round for c in listed if c.counted is True})

    def stands_in_front(c: Candidate) -> bool:
        end = next((r for r in counted_rounds if r > c.commit_round), None)
        return any(
            c.commit_round < w.commit_round and (end is None or w.commit_round <= end)
            for w in behind
        )

    references = [
        c for c in listed if newest[c.hotkey] is not c and c.counted is not False
        and stands_in_front(c)
    ]  # fmt: skip
    return entries, references
