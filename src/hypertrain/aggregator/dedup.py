"""Exact copies: one round merges each update's bytes once.

Commits are public while a round trains, so an island could copy another's update and
claim a second share. An update whose hash equals an earlier commit's is excluded as
``duplicate_update``; the earliest commit (the service's ``commit_order``) keeps it.
Copies that are not byte-identical (rescaled, reversed, with noise added, or a
combination of several updates) are found on the exact Gram matrix
(:mod:`hypertrain.aggregator.aggregate`, ``near_duplicate``).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypertrain.protocol.exclusions import ExclusionReason


def exact_duplicates(order: Sequence[tuple[str, str]]) -> dict[str, tuple[ExclusionReason, str]]:
    """hotkey -> (reason, detail) for each later copy, given ``(hotkey, sha)`` in commit order."""
    first: dict[str, str] = {}
    out: dict[str, tuple[ExclusionReason, str]] = {}
    for hotkey, sha in order:
        if sha in first:
            out[hotkey] = ("duplicate_update", f"the same update as {first[sha]}'s earlier commit")
        else:
            first[sha] = hotkey
    return out
