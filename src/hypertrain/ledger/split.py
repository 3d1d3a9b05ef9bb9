"""Exact integer splits: the pool among miners, and a reward over its vesting tranches.

All functions here are pure and return parts that sum to the input exactly; no floats are
used anywhere. Ties in the largest-remainder method go to the hotkey that sorts first
(plain string order of the SS58 address), so the split is a function of its inputs only.
"""

from __future__ import annotations

from collections.abc import Mapping


def largest_remainder(pool: int, tokens: Mapping[str, int]) -> dict[str, int]:
    """Split ``pool`` in proportion to ``tokens``; parts sum to ``pool`` exactly.

    Each hotkey first gets ``floor(pool * t / T)``; the few units left over (fewer than
    the number of hotkeys) go one each to the largest remainders ``pool * t mod T``,
    ties broken by ascending hotkey. With no tokens at all, every part is zero and the
    caller burns the whole pool.
    """
    if pool < 0 or any(t < 0 for t in tokens.values()):
        raise ValueError("pool and token counts must be non-negative")
    total = sum(tokens.values())
    if total == 0:
        return dict.fromkeys(sorted(tokens), 0)
    parts: dict[str, int] = {}
    remainders: list[tuple[int, str]] = []
    for hotkey in sorted(tokens):
        share, rem = divmod(pool * tokens[hotkey], total)
        parts[hotkey] = share
        remainders.append((-rem, hotkey))
    leftover = pool - sum(parts.values())
    for _, hotkey in sorted(remainders)[:leftover]:
        parts[hotkey] += 1
    return parts


def vesting_schedule(amount: int, vesting_rounds: int) -> list[int]:
    """The tranches of ``amount`` over ``vesting_rounds``: the first ``amount mod V`` get +1."""
    if amount < 0 or vesting_rounds < 1:
        raise ValueError("amount must be >= 0 and vesting_rounds >= 1")
    base, extra = divmod(amount, vesting_rounds)
    return [base + (1 if i < extra else 0) for i in range(vesting_rounds)]


def vested_prefix(amount: int, vesting_rounds: int, elapsed_rounds: int) -> int:
    """Sum of the first ``elapsed_rounds`` tranches (clamped to 0..V): what has vested."""
    k = max(0, min(vesting_rounds, elapsed_rounds))
    base, extra = divmod(amount, vesting_rounds)
    return k * base + min(k, extra)


def vest_start(round_: int, held_until: int) -> int:
    """The round a reward's vesting clock counts from: its own, or later if it was held.

    ``held_until`` is the first round after the island's probation (0: never held). A
    held reward vests as if earned in the last probation round ``held_until - 1``, so
    its first tranche comes with the first settlement at or after ``held_until``.
    """
    return max(round_, held_until - 1)
