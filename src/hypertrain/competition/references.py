"""Which commitments a cycle lists: each hotkey's newest model, and the references.

A hotkey's newer commitment does not take its older model out of the order. An older
model (first of its model hash, revealed, eligible) stays listed as a *reference* while
both hold:

1. it counted in the latest settled cycle that listed it (one never listed yet stays
   until a cycle has judged it), and
2. another hotkey committed a model after it, no later than its own hotkey's next
   commitment (its *window*): the models it stands in front of, which must still beat
   it by epsilon. With nobody in the window it stands in front of nobody.

References are scored and filtered like any model (docs/competition.md, "Winning");
a hotkey earns with its newest model that counts, so a reference earns only while its
hotkey's newer model does not count. Of several commitments of one hotkey in one
beacon round only the last is listed (they are older than nothing of each other).
Everything here is a pure function of the commitments and the previous verdicts.
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
    failed_last: bool = False  # did not count in the latest settled cycle that listed it

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
    older = [c for c in listed if newest[c.hotkey] is not c]
    survivors = entries + [c for c in older if not c.failed_last]

    def next_round(c: Candidate) -> int:
        return min(o.commit_round for o in listed if o.hotkey == c.hotkey and o.order > c.order)

    def in_window(c: Candidate) -> bool:
        end = next_round(c)
        return any(
            w.hotkey != c.hotkey and c.commit_round < w.commit_round <= end for w in survivors
        )

    references = [c for c in older if not c.failed_last and in_window(c)]
    return entries, references
