"""Binary Merkle trees with domain-separated leaves and nodes (RFC 6962 shape).

Rules (docs/protocol.md has the byte layout):

* leaf hash  = tagged_hash(MERKLE_LEAF, data)
* node hash  = tagged_hash(MERKLE_NODE, left || right)
* levels are built pairwise left to right; an odd last node is promoted unchanged to
  the next level (never duplicated, so two different leaf lists never share a root).
  This gives exactly the RFC 6962 tree shape.
* the root of zero leaves is tagged_hash(MERKLE_EMPTY, b""); of one leaf, its leaf hash.

Each level is one contiguous ``bytes`` of 32-byte digests, so a tree over n leaves
holds about 2n digests and no per-node Python objects: O(n) memory and time. A small
optional C module (``_merkle_c``, built by setup.py against OpenSSL) hashes whole levels
per call; without it the same bytes come from hashlib.
"""

from __future__ import annotations

import hashlib
import multiprocessing
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from operator import methodcaller
from typing import Any, Final

from hypertrain.protocol import domains
from hypertrain.protocol.errors import MerkleError

try:  # the optional C accelerator (setup.py); same bytes, no Python call per hash
    from hypertrain.protocol import _merkle_c
except ImportError:  # pragma: no cover - depends on the build environment
    _merkle_c = None  # type: ignore[assignment]

DIGEST_SIZE: Final = 32
MAX_PROOF_DEPTH: Final = 64

_LEAF_PREFIX: Final = domains.tagged_prefix(domains.MERKLE_LEAF)
_NODE_PREFIX: Final = domains.tagged_prefix(domains.MERKLE_NODE)
EMPTY_ROOT: Final = domains.tagged_hash(domains.MERKLE_EMPTY, b"")


def leaf_hash(data: bytes) -> bytes:
    """Hash of one leaf's data."""
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """Hash of an interior node from its two children."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


# Levels of at least this many digests are split across worker processes when the
# caller asks for workers > 1 (process start-up costs more than it saves below it).
PARALLEL_MIN_DIGESTS: Final = 1 << 17
_DIGEST = methodcaller("digest")


def _hash_leaves_py(leaves: Iterable[bytes]) -> bytes:
    # map() chains keep the per-leaf loop in C; this is 2-3x faster than a comprehension.
    return b"".join(map(_DIGEST, map(hashlib.sha256, map(_LEAF_PREFIX.__add__, leaves))))


def _hash_pairs_py(level: bytes) -> bytes:
    """Node hashes of consecutive digest pairs of ``level`` (whose length is a multiple of 64)."""
    size = len(level)
    pairs = map(level.__getitem__, map(slice, range(0, size, 64), range(64, size + 64, 64)))
    return b"".join(map(_DIGEST, map(hashlib.sha256, map(_NODE_PREFIX.__add__, pairs))))


def _hash_leaves(leaves: Iterable[bytes]) -> bytes:
    if _merkle_c is None:
        return _hash_leaves_py(leaves)
    items = leaves if isinstance(leaves, (list, tuple)) else list(leaves)
    return _merkle_c.hash_leaves(_LEAF_PREFIX, items)


def _hash_pairs(level: bytes) -> bytes:
    if _merkle_c is None:
        return _hash_pairs_py(level)
    return _merkle_c.hash_pairs(_NODE_PREFIX, level)


def _chunks(total: int, parts: int, align: int) -> list[tuple[int, int]]:
    step = -(-total // parts // align) * align
    return [(i, min(i + step, total)) for i in range(0, total, step)]


def _next_level(level: bytes, pool: Executor | None = None, workers: int = 1) -> bytes:
    """Pair up the digests of one level; an odd last digest is promoted."""
    pairs_end = (len(level) // (2 * DIGEST_SIZE)) * 2 * DIGEST_SIZE
    if pool is None or pairs_end < PARALLEL_MIN_DIGESTS * DIGEST_SIZE:
        return _hash_pairs(level[:pairs_end]) + level[pairs_end:]
    spans = _chunks(pairs_end, workers, 2 * DIGEST_SIZE)
    parts = pool.map(_hash_pairs, [level[a:b] for a, b in spans])
    return b"".join(parts) + level[pairs_end:]


def _leaf_level(leaves: Sequence[bytes], pool: Executor | None, workers: int) -> bytes:
    if pool is None or len(leaves) < PARALLEL_MIN_DIGESTS:
        return _hash_leaves(leaves)
    spans = _chunks(len(leaves), workers, 1)
    return b"".join(pool.map(_hash_leaves, [leaves[a:b] for a, b in spans]))


def _pool(workers: int, size: int) -> Executor | None:
    if workers <= 1 or size < PARALLEL_MIN_DIGESTS:
        return None
    if _merkle_c is not None:
        # The accelerator releases the GIL while hashing, so threads run in parallel.
        return ThreadPoolExecutor(workers)
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


@dataclass(frozen=True, slots=True)
class MerkleProof:
    """Inclusion proof of leaf ``index`` in a tree of ``leaf_count`` leaves."""

    index: int
    leaf_count: int
    siblings: tuple[bytes, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "leaf_count": self.leaf_count,
            "siblings": [s.hex() for s in self.siblings],
        }

    @classmethod
    def from_json(cls, value: Any) -> MerkleProof:
        """Decode the JSON form, refusing anything malformed with :class:`MerkleError`."""
        if not isinstance(value, dict) or set(value) != {"index", "leaf_count", "siblings"}:
            raise MerkleError("proof must be an object with index, leaf_count and siblings")
        index, count, sibs = value["index"], value["leaf_count"], value["siblings"]
        if not _is_uint(index) or not _is_uint(count):
            raise MerkleError("proof index and leaf_count must be non-negative integers")
        if not isinstance(sibs, list) or len(sibs) > MAX_PROOF_DEPTH:
            raise MerkleError(f"proof siblings must be a list of at most {MAX_PROOF_DEPTH}")
        return cls(index, count, tuple(_decode_digest(s) for s in sibs))


def _is_uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _decode_digest(value: Any) -> bytes:
    if not isinstance(value, str) or len(value) != 2 * DIGEST_SIZE:
        raise MerkleError("each sibling must be a 64-character hex SHA-256 digest")
    try:
        return bytes.fromhex(value)
    except ValueError as exc:
        raise MerkleError(f"sibling is not hex: {value[:16]}…") from exc


class MerkleTree:
    """An immutable Merkle tree; build with :meth:`from_leaves` or :meth:`from_leaf_hashes`."""

    __slots__ = ("_levels",)

    def __init__(self, levels: list[bytes]) -> None:
        self._levels = levels

    @classmethod
    def from_leaves(cls, leaves: Iterable[bytes], *, workers: int = 1) -> MerkleTree:
        """Build from raw leaf data (each leaf is hashed with the leaf domain).

        ``workers > 1`` hashes large levels in that many forked processes; the bytes
        are identical to the single-process build.
        """
        items = leaves if isinstance(leaves, Sequence) else list(leaves)
        pool = _pool(workers, len(items))
        try:
            return cls._build(_leaf_level(items, pool, workers), pool, workers)
        finally:
            if pool is not None:
                pool.shutdown()

    @classmethod
    def from_leaf_hashes(cls, hashes: bytes | Sequence[bytes], *, workers: int = 1) -> MerkleTree:
        """Build from already computed leaf hashes (contiguous bytes or a sequence)."""
        level = hashes if isinstance(hashes, bytes) else b"".join(hashes)
        if len(level) % DIGEST_SIZE:
            raise MerkleError("leaf hashes must be a whole number of 32-byte digests")
        pool = _pool(workers, len(level) // DIGEST_SIZE)
        try:
            return cls._build(level, pool, workers)
        finally:
            if pool is not None:
                pool.shutdown()

    @classmethod
    def _build(cls, level: bytes, pool: Executor | None = None, workers: int = 1) -> MerkleTree:
        levels = [level]
        while len(levels[-1]) > DIGEST_SIZE:
            levels.append(_next_level(levels[-1], pool, workers))
        return cls(levels)

    def __len__(self) -> int:
        return len(self._levels[0]) // DIGEST_SIZE

    @property
    def root(self) -> bytes:
        top = self._levels[-1]
        return top if top else EMPTY_ROOT

    @property
    def root_hex(self) -> str:
        return self.root.hex()

    def leaf_hash_at(self, index: int) -> bytes:
        self._check_index(index)
        return self._levels[0][index * DIGEST_SIZE : (index + 1) * DIGEST_SIZE]

    def proof(self, index: int) -> MerkleProof:
        """The inclusion proof for leaf ``index``."""
        self._check_index(index)
        siblings: list[bytes] = []
        pos = index
        for level in self._levels[:-1]:
            count = len(level) // DIGEST_SIZE
            sib = pos ^ 1
            if sib < count:
                siblings.append(level[sib * DIGEST_SIZE : (sib + 1) * DIGEST_SIZE])
            pos //= 2
        return MerkleProof(index, len(self), tuple(siblings))

    def _check_index(self, index: int) -> None:
        if not 0 <= index < len(self):
            raise MerkleError(f"leaf index {index} out of range for {len(self)} leaves")


def merkle_root(leaves: Iterable[bytes]) -> bytes:
    """Root over raw leaf data."""
    return MerkleTree.from_leaves(leaves).root


def root_from_proof(leaf_digest: bytes, proof: MerkleProof) -> bytes:
    """Recompute the root implied by a leaf hash and a proof; raises on a malformed proof."""
    if not 0 <= proof.index < proof.leaf_count:
        raise MerkleError(f"proof index {proof.index} out of range for {proof.leaf_count} leaves")
    node, pos, count = leaf_digest, proof.index, proof.leaf_count
    sibs = iter(proof.siblings)
    used = 0
    while count > 1:
        if pos ^ 1 < count:
            sib = next(sibs, None)
            if sib is None or len(sib) != DIGEST_SIZE:
                raise MerkleError("proof is too short or has a malformed sibling")
            used += 1
            node = node_hash(sib, node) if pos & 1 else node_hash(node, sib)
        pos, count = pos // 2, (count + 1) // 2
    if used != len(proof.siblings):
        raise MerkleError("proof has more siblings than the tree has levels")
    return node


def verify_proof(root: bytes, leaf_data: bytes, proof: MerkleProof) -> None:
    """Check that ``leaf_data`` sits at ``proof.index`` under ``root``; raise if not."""
    verify_proof_for_hash(root, leaf_hash(leaf_data), proof)


def verify_proof_for_hash(root: bytes, leaf_digest: bytes, proof: MerkleProof) -> None:
    """Like :func:`verify_proof` for a leaf whose hash is already known."""
    if root_from_proof(leaf_digest, proof) != root:
        raise MerkleError(f"proof for leaf {proof.index} does not lead to root {root.hex()[:16]}…")
