"""The robust aggregate of a screened round: which updates count, and with what coefficient.

Input: the updates the norm screen accepted, with their clip factors and verified
tokens, and the public updates of the last :data:`EARLIER_ROUNDS` merged rounds
(``Tape.earlier``: each earlier tape's included updates, flagged when an audit proved
them). Steps, all on the exact Gram matrix (:mod:`hypertrain.aggregator.gram`) of the
*unclipped* updates, this round's and the earlier ones, decided by
:mod:`hypertrain.aggregator.robust`:

1. **Copies**: visiting the earlier updates first, then this round's in commit order,
   an update explained by those kept before it (relative residual below
   ``COPY_RESIDUAL`` after projection onto their span) is excluded as
   ``near_duplicate``; the earliest commit keeps its direction, and an earlier round's
   public update replayed (re-encoded, rescaled, combined) is explained by itself.
2. **Against the aggregate**: on the clipped updates ``v_i = clip_i * u_i``, an update
   whose cosine with the token-weighted geometric median of the others is below
   ``AGAINST_COSINE`` *and*, where audit-proven updates exist (this round's, else none
   needed, plus the earlier proven ones), whose cosine with their direction is below it
   too, is excluded as ``against_aggregate``, the lowest first, repeated on the rest
   until none is left (:func:`against`). An honest update agrees with audited work, so
   sybils holding half the tokens, which make the others' median theirs, cannot evict it.
3. **Coefficients**: the token-weighted geometric median of the remaining clipped
   updates, ``z = sum_i a_i v_i``; ``a_i`` is the tape's ``weight`` and the merge adds
   ``float32(a_i * clip_i) * u_i`` in hotkey order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hypertrain.aggregator.gram import Gram, Shapes, gram_matrix
from hypertrain.aggregator.robust import (
    AGAINST_COSINE,
    COPY_RESIDUAL,
    find_copies,
    geometric_median,
    loo_cosines,
    reference_cosines,
)
from hypertrain.aggregator.tape import Earlier, Tape
from hypertrain.protocol.exclusions import ExclusionReason
from hypertrain.protocol.manifest import CompressionSpec

Rejected = dict[str, tuple[ExclusionReason, str]]
EARLIER_ROUNDS = 2  # merged rounds whose public updates this round's are screened against
EARLIER_UPDATES = 32  # at most this many of them (the newest)


@dataclass(frozen=True, slots=True)
class Aggregate:
    weights: dict[str, float]  # hotkey -> geometric-median coefficient (sums to 1)
    rejected: Rejected = field(default_factory=dict)


def _public(tape: Tape) -> list[Earlier]:
    proven = set(tape.proven)
    return [
        Earlier(round=tape.round, hotkey=i.hotkey, update_sha256=i.update_sha256,
                proven=i.hotkey in proven)
        for i in sorted(tape.included, key=lambda i: i.hotkey)
    ]  # fmt: skip


def earlier_updates(
    tapes: Iterable[Tape], index: int, before: Sequence[Earlier] = ()
) -> list[Earlier]:
    """The public updates merged in the :data:`EARLIER_ROUNDS` rounds before ``index``:
    the included updates of those of ``tapes`` (given newest first), and the ``before``
    entries of window rounds no tape covers (a rebase's rounds before its chain); at
    most :data:`EARLIER_UPDATES`, the newest rounds first, returned oldest round first."""
    window = range(max(0, index - EARLIER_ROUNDS), index)
    found: dict[int, list[Earlier]] = {}
    for tape in tapes:
        if tape.round < window.start:
            break
        if tape.round in window:
            found[tape.round] = _public(tape)
    for r in window:
        if r not in found:
            found[r] = [e for e in before if e.round == r]
    newest = [e for r in reversed(window) for e in found[r]][:EARLIER_UPDATES]
    return sorted(newest, key=lambda e: (e.round, e.hotkey))


def older_updates(tapes: Iterable[Tape], index: int, earlier: Sequence[Earlier]) -> list[Earlier]:
    """Every public update merged before round ``index`` (the included updates of
    ``tapes``) that is not in ``earlier``, oldest round first: the run sketch's span
    (:mod:`hypertrain.aggregator.sketch`)."""
    exact = {(e.round, e.hotkey) for e in earlier}
    out = [e for t in tapes if t.round < index for e in _public(t)]
    return sorted(
        (e for e in out if (e.round, e.hotkey) not in exact), key=lambda e: (e.round, e.hotkey)
    )


def _scaled(gram: Gram, idx: Sequence[int], clip: Sequence[float]) -> Gram:
    return [[clip[i] * clip[j] * gram[i][j] for j in idx] for i in idx]


def copies(gram: Gram, names: Sequence[str], order: Sequence[int], count: int) -> Rejected:
    """This round's updates (indices below ``count``) explained by those visited before
    them in ``order``; ``names`` names every index (earlier updates with their round)."""
    out: Rejected = {}
    for c in find_copies(gram, order):
        if c.index >= count:
            continue  # an earlier round's update: not on trial here
        basis = ", ".join(names[k] for k in c.basis)
        out[names[c.index]] = (
            "near_duplicate",
            f"explained by earlier updates ({basis}): residual {c.residual:.6f} of its norm"
            f" after projection (threshold {COPY_RESIDUAL})",
        )
    return out


def against(
    gram: Gram,
    live: Sequence[int],
    clip: Sequence[float],
    tokens: Sequence[int],
    trusted: Mapping[int, float] | None = None,
) -> list[tuple[int, float]]:
    """(index, cosine) of each update left out as pointing against the others.

    One at a time: of the updates below the threshold with the others' median (and,
    given ``trusted`` cosines with the proven direction, below it there too), the lowest
    goes and the cosines are recomputed without it, so one reversed update cannot drag
    the others' leave-one-out medians down with it. Without a trusted direction, two
    updates below the threshold with each other cannot be told apart: both go.
    """
    left = list(live)
    out: list[tuple[int, float]] = []
    while len(left) >= 2:
        cosines = loo_cosines(_scaled(gram, left, clip), [tokens[i] for i in left])
        below = [
            k
            for k in range(len(left))
            if cosines[k] < AGAINST_COSINE
            and (trusted is None or trusted[left[k]] < AGAINST_COSINE)
        ]
        if not below:
            break
        if len(left) == 2 and trusted is None:
            return out + list(zip(left, cosines, strict=True))
        worst = min(below, key=lambda k: (cosines[k], k))
        out.append((left.pop(worst), cosines[worst]))
    return out


def _trusted(gram: Gram, live: Sequence[int], proven: Sequence[int]) -> dict[int, float] | None:
    """Each live update's cosine with the direction of the proven ones (None: none)."""
    cos = reference_cosines(gram, proven, live)
    return None if cos is None else dict(zip(live, cos, strict=True))


def _against_detail(cos: float, trusted: Mapping[int, float] | None, i: int) -> str:
    text = f"cosine {cos:.6f} with the geometric median of the other updates"
    if trusted is not None:
        text += f" and {trusted[i]:.6f} with the audit-proven direction"
    return text + f" (threshold {AGAINST_COSINE})"


def robust_aggregate(
    clip: Mapping[str, float],
    tokens: Mapping[str, int],
    arrival: Sequence[str],
    fetch: Callable[[str], bytes],
    shapes: Shapes,
    compression: CompressionSpec,
    *,
    earlier: Sequence[tuple[Earlier, bytes]] = (),
    proven: Collection[str] = (),
) -> Aggregate:
    """Copies and updates against the rest left out, the median's coefficients for the rest.

    ``fetch`` gives a candidate's update bytes by hotkey; ``earlier`` the earlier rounds'
    public updates with their bytes; ``proven`` the hotkeys an audit proved this round.
    """
    hotkeys = sorted(clip)
    if not hotkeys:
        return Aggregate({})
    n = len(hotkeys)
    gram = gram_matrix([fetch(h) for h in hotkeys] + [d for _, d in earlier], shapes, compression)
    names = hotkeys + [f"{e.hotkey} of round {e.round}" for e, _ in earlier]
    index = {h: i for i, h in enumerate(hotkeys)}
    order = list(range(n, len(names))) + [index[h] for h in arrival if h in index]
    rejected = copies(gram, names, order, n)
    live = [i for i, h in enumerate(hotkeys) if h not in rejected]
    reference = [i for i in live if hotkeys[i] in proven]
    reference += [n + k for k, (e, _) in enumerate(earlier) if e.proven]
    trusted = _trusted(gram, live, reference)
    factors = [clip[h] for h in hotkeys]
    for i, cos in against(gram, live, factors, [tokens[h] for h in hotkeys], trusted):
        rejected[hotkeys[i]] = ("against_aggregate", _against_detail(cos, trusted, i))
    live = [i for i in live if hotkeys[i] not in rejected]
    a = geometric_median(_scaled(gram, live, factors), [tokens[hotkeys[i]] for i in live])
    return Aggregate({hotkeys[i]: w for i, w in zip(live, a, strict=True)}, rejected)
