"""Traffic arithmetic: one honest count of our bytes, one data-parallel baseline, one wording.

Both sides are counted at the training nodes' network links, in both directions: what a
node sends plus what it receives.

*Data-parallel* is synchronous training with a bf16 gradient all-reduce after every
step over a ring of ``n`` devices (one per island, the same tokens). A ring all-reduce
of ``B`` bytes makes each device send ``2 (n - 1) / n x B`` bytes and receive as many,
so for ``P`` parameters and ``S`` steps the ring's links carry

    data_parallel_bytes = n x 2 x 2 (n - 1) / n x 2 P x S       (2 bytes per bf16 value)

One device alone (``n = 1``) moves nothing.

*Ours* (:class:`RoundBytes`) is what the islands' links carry in a round: the signed
commits and updates they send, the start-model broadcast they receive (the merged outer
update, about one byte per parameter), the checkpoints an audit selected that they send,
and the full model a joining (or catching-up) island receives. Relays, auditors and the
aggregator are servers, not training nodes, and are not counted on either side.

Every ratio is data-parallel's bytes over ours and is printed by :func:`ratio_words` as
"N× less than data-parallel" or "N× more than data-parallel", never as a bare factor.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Final

BF16_BYTES: Final = 2
# Bytes per element of each width the manifest names (``inner.carried_dtype``).
DTYPE_BYTES: Final = {"float32": 4, "bfloat16": BF16_BYTES}

FORMULA: Final = (
    "data-parallel bytes = islands x 2 (sent and received) x 2(n-1)/n x 2 B x params x H"
    " per round (bf16 ring all-reduce every step, n = islands)"
)


def ddp_bytes_per_device(params: int, devices: int, steps: int) -> int:
    """Bytes one device *sends* in ``steps`` bf16 ring all-reduces of ``params`` gradients."""
    if devices < 1 or params < 0 or steps < 0:
        raise ValueError(f"bad traffic inputs: {params} params, {devices} devices, {steps} steps")
    return (2 * (devices - 1) * BF16_BYTES * params * steps) // devices


def ddp_bytes_total(params: int, devices: int, steps: int) -> int:
    """Bytes the whole ring sends: ``devices`` x :func:`ddp_bytes_per_device`."""
    return devices * ddp_bytes_per_device(params, devices, steps)


def data_parallel_bytes(params: int, devices: int, steps: int) -> int:
    """The baseline: bytes the ring's links carry, sent and received, for ``steps`` steps."""
    return 2 * ddp_bytes_total(params, devices, steps)


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundBytes:
    """Bytes the islands' links carry in one round (or a sum of rounds), by kind."""

    commits: int = 0
    updates: int = 0
    broadcasts: int = 0
    checkpoints: int = 0
    joins: int = 0

    def __post_init__(self) -> None:
        if min(self.parts().values()) < 0:
            raise ValueError(f"negative byte count in {self.parts()}")

    def parts(self) -> dict[str, int]:
        return asdict(self)

    def total(self) -> int:
        return sum(self.parts().values())

    def __add__(self, other: RoundBytes) -> RoundBytes:
        mine, theirs = self.parts(), other.parts()
        return RoundBytes(**{k: mine[k] + theirs[k] for k in mine})


def ratio(data_parallel: int, ours: int) -> float | None:
    """Data-parallel bytes over ours; None when we moved nothing (no ratio to state)."""
    return data_parallel / ours if ours > 0 else None


def _factor(x: float) -> str:
    return f"{x:.1f}" if x < 10 else f"{x:,.0f}"


def ratio_words(data_parallel: int, ours: int) -> str:
    """The ratio in words: "N× less than data-parallel" or "N× more than data-parallel"."""
    if ours <= 0:
        return "no bytes moved yet"
    if data_parallel <= 0:
        return "data-parallel would move nothing (one island)"
    return factor_words(data_parallel / ours)


def factor_words(factor: float) -> str:
    """A ratio already divided out (data-parallel over ours, > 0), in the same words."""
    if factor <= 0:
        raise ValueError(f"a traffic ratio must be positive, got {factor}")
    n = _factor(factor if factor >= 1 else 1 / factor)
    if n == "1.0":
        return "as much as data-parallel"
    return f"{n}× {'less' if factor >= 1 else 'more'} than data-parallel"


@dataclass(frozen=True, slots=True)
class TrafficRound:
    """One round's count: our bytes, the baseline for the same tokens, and whether an
    island of the round was still in probation (audited every round)."""

    round: int
    ours: RoundBytes
    data_parallel: int
    probation: bool


@dataclass(frozen=True, slots=True)
class TrafficTotal:
    """A sum of rounds, with its ratio in number and in words."""

    rounds: int
    ours: RoundBytes
    data_parallel: int

    @property
    def ours_bytes(self) -> int:
        return self.ours.total()

    @property
    def ratio(self) -> float | None:
        return ratio(self.data_parallel, self.ours_bytes)

    @property
    def words(self) -> str:
        if self.rounds == 0:
            return "no such round yet"
        return ratio_words(self.data_parallel, self.ours_bytes)


def total(rounds: Iterable[TrafficRound]) -> TrafficTotal:
    """The sum of ``rounds`` (any subset)."""
    ours, ddp, n = RoundBytes(), 0, 0
    for r in rounds:
        ours, ddp, n = ours + r.ours, ddp + r.data_parallel, n + 1
    return TrafficTotal(n, ours, ddp)


@dataclass(frozen=True, slots=True)
class AllIn:
    """The headline figure: every round plus the warm start, whose steps are data-parallel
    and so count the same ring bytes on both sides (``warm_start``: those bytes). A warm
    start of a share ``w`` of all steps therefore caps the ratio at ``1 / w``, however
    few bytes the rounds move."""

    rounds: TrafficTotal
    warm_start: int = 0

    def __post_init__(self) -> None:
        if self.warm_start < 0:
            raise ValueError(f"negative warm-start bytes: {self.warm_start}")

    @property
    def ours_bytes(self) -> int:
        return self.rounds.ours_bytes + self.warm_start

    @property
    def data_parallel(self) -> int:
        return self.rounds.data_parallel + self.warm_start

    @property
    def ratio(self) -> float | None:
        return ratio(self.data_parallel, self.ours_bytes)

    @property
    def words(self) -> str:
        if self.rounds.rounds == 0:
            return "no such round yet"
        return ratio_words(self.data_parallel, self.ours_bytes)


@dataclass(frozen=True, slots=True)
class TrafficSummary:
    """The run's totals: all rounds, the steady-state rounds and the probation rounds."""

    all: TrafficTotal
    steady: TrafficTotal
    probation: TrafficTotal


def summarize(rounds: Iterable[TrafficRound]) -> TrafficSummary:
    """The one summary every reader (dashboard tile and table, devnet summary) shows."""
    rows = list(rounds)
    return TrafficSummary(
        total(rows),
        total(r for r in rows if not r.probation),
        total(r for r in rows if r.probation),
    )


def uploads_per_audit(
    segments: int, drawn: int, carried: bool, audit_rate: float = 0.0, carried_size: float = 1.0
) -> float:
    """Training states' worth of bytes an audited island uploads on average: the selected
    segments' start checkpoints but segment 0's (the final segment always, ``drawn`` more
    at random among the ``segments - 1`` others, segment 0 among them with probability
    ``drawn / (segments - 1)``) and, ``carried`` (the ``carry`` policy), the state its
    previous round carried (``carried_size`` of a training state: no parameters) unless
    an auditor stored it: one that matched the island's round before, which the rate drew
    with probability ``audit_rate`` (``RoundOpen.carry_stored``). One segment (J = H):
    nothing but the carried state, ``1 - audit_rate`` of the time."""
    if segments < 1 or drawn < 0 or not 0.0 <= audit_rate <= 1.0 or not 0 < carried_size <= 1:
        raise ValueError(
            f"an audit of {segments} segments cannot draw {drawn} at rate {audit_rate}"
            f" with a carried state of {carried_size} training states"
        )
    picked = 0.0
    if segments > 1:
        k = min(drawn, segments - 1)
        picked = 1 + k - k / (segments - 1)
    return picked + ((1.0 - audit_rate) * carried_size if carried else 0.0)
