"""The dataset Merkle root computed in O(log n) memory while samples stream past.

:class:`hypertrain.protocol.merkle.MerkleTree` pairs each level left to right and
promotes an odd last node, which is the RFC 6962 shape: the tree over ``n`` leaves is
a sequence of perfect subtrees of decreasing size, joined from the right. Keeping one
root per perfect subtree (a binary counter of subtree heights) therefore gives the
same root without holding every leaf; tests check equality for many ``n``.
"""

from __future__ import annotations

from hypertrain.protocol.merkle import EMPTY_ROOT, leaf_hash, node_hash


class StreamingRoot:
    """Feed leaf data in order with :meth:`add`; read :attr:`root` at any time."""

    __slots__ = ("_count", "_stack")

    def __init__(self) -> None:
        self._stack: list[tuple[int, bytes]] = []  # (height, subtree root), heights decreasing
        self._count = 0

    def add(self, leaf_data: bytes) -> None:
        height, node = 0, leaf_hash(leaf_data)
        while self._stack and self._stack[-1][0] == height:
            _, left = self._stack.pop()
            height, node = height + 1, node_hash(left, node)
        self._stack.append((height, node))
        self._count += 1

    def __len__(self) -> int:
        return self._count

    @property
    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        node = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            node = node_hash(left, node)
        return node
