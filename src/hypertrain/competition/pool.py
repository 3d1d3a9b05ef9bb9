"""The secret evaluation pool: committed by Merkle root, revealed page by page per cycle.

The operator prepares the pool like any dataset (``hypertrain data prepare`` on text
that is never published) and hands its samples to the service when it creates the
competition; the signed spec carries only ``pool_root`` (the Merkle root of the
sample hashes, exactly as a dataset root) and ``pool_count``. Cycle *k*'s pages are
drawn, by that cycle's beacon randomness, from the pool positions no earlier cycle
revealed; the task publishes each page's tokens with its Merkle proof, and every
evaluator (and anyone reading the cycle's public record) checks them against the
committed root before scoring. A page is therefore unknown to every submitter until
after the last commitment the cycle scores, and is never scored again.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hypertrain.competition.spec import CompetitionSpec
from hypertrain.data.errors import SampleProofError
from hypertrain.data.permutation import Permutation
from hypertrain.data.samples import sample_hashes, verify_sample
from hypertrain.protocol.merkle import MerkleProof, MerkleTree


class PoolError(ValueError):
    """A pool (or a revealed page) does not match the committed pool root."""


def pool_tree(samples: npt.NDArray[np.unsignedinteger]) -> MerkleTree:
    """The Merkle tree over the sample hashes of a ``(count, seq_len)`` array."""
    digests = sample_hashes(samples)
    return MerkleTree.from_leaves(digests[i : i + 32] for i in range(0, len(digests), 32))


def encode_pool(samples: npt.NDArray[np.unsignedinteger]) -> str:
    """Base64 of the samples as little-endian uint32 (what the create request carries)."""
    return base64.b64encode(np.ascontiguousarray(samples, dtype="<u4").tobytes()).decode()


def decode_pool(text: str, spec: CompetitionSpec) -> npt.NDArray[np.uint32]:
    """The pool samples, checked against the spec's count, length, vocabulary and root."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise PoolError("the pool is not valid base64") from None
    count, seq_len = spec.data.pool_count, spec.data.seq_len
    if len(raw) != 4 * count * seq_len:
        raise PoolError(f"the pool must hold {count} samples of {seq_len} uint32 tokens")
    samples = np.frombuffer(raw, dtype="<u4").reshape(count, seq_len).astype(np.uint32)
    if int(samples.max(initial=0)) >= spec.architecture.vocab_size:
        raise PoolError("a pool token is outside the vocabulary")
    if pool_tree(samples).root.hex() != spec.data.pool_root:
        raise PoolError("the pool does not hash to the spec's pool_root")
    return samples


def pool_spent(spec: CompetitionSpec, used: Iterable[int]) -> bool:
    """Fewer than ``pages_per_eval`` unrevealed samples remain: no further cycle can open
    (the operator creates a new competition with a fresh pool). Once true, always true."""
    return spec.data.pool_count - len(set(used)) < spec.data.pages_per_eval


def cycle_positions(spec: CompetitionSpec, key_hex: str, used: Iterable[int]) -> list[int]:
    """Pool positions of a cycle: the keyed permutation's first pages among unused ones;
    empty when the pool is spent (:func:`pool_spent`)."""
    revealed = set(used)
    if pool_spent(spec, revealed):
        return []
    remaining = [p for p in range(spec.data.pool_count) if p not in revealed]
    count = spec.data.pages_per_eval
    order = Permutation(bytes.fromhex(key_hex), len(remaining)).range(0, count)
    return [remaining[int(i)] for i in order]


def verified_pages(
    spec: CompetitionSpec,
    positions: Sequence[int],
    tokens_hex: Sequence[str],
    proofs: Sequence[MerkleProof],
) -> npt.NDArray[np.int64]:
    """The revealed pages as ``[pages, seq_len]`` int64, each checked against ``pool_root``."""
    if not len(positions) == len(tokens_hex) == len(proofs):
        raise PoolError("positions, tokens and proofs differ in number")
    root = bytes.fromhex(spec.data.pool_root)
    rows = []
    for position, text, proof in zip(positions, tokens_hex, proofs, strict=True):
        try:
            tokens = np.frombuffer(bytes.fromhex(text), dtype="<u4")
        except ValueError:
            raise PoolError(f"page {position}: tokens are not hex") from None
        if tokens.shape[0] != spec.data.seq_len:
            raise PoolError(f"page {position} does not hold {spec.data.seq_len} tokens")
        try:
            verify_sample(root, position, tokens, proof)
        except SampleProofError as exc:
            raise PoolError(f"page {position} does not match the committed pool: {exc}") from None
        rows.append(tokens.astype(np.int64))
    return np.stack(rows) if rows else np.zeros((0, spec.data.seq_len), dtype=np.int64)


def load_pool(spec_doc: dict[str, Any], pool_dir: Path) -> tuple[dict[str, Any], str]:
    """Fill a spec's ``pool_root`` and ``pool_count`` from a prepared (secret) dataset.

    Returns the completed spec and the encoded pool for the create request; refuses a
    spec that already names a different pool or a dataset of another sample length.
    """
    from hypertrain.data.dataset import Dataset
    from hypertrain.data.descriptor import DESCRIPTOR_NAME

    dataset = Dataset(pool_dir / DESCRIPTOR_NAME)
    samples = np.stack([dataset.sample(i) for i in range(len(dataset))]).astype(np.uint32)
    data = dict(spec_doc.get("data", {}))
    root = pool_tree(samples).root.hex()
    for key, value in (("pool_root", root), ("pool_count", len(dataset))):
        if data.get(key, value) != value:
            raise PoolError(f"the spec's data.{key} is not that of the pool in {pool_dir}")
        data[key] = value
    if data.get("seq_len", dataset.seq_len) != dataset.seq_len:
        raise PoolError(f"the pool's samples are {dataset.seq_len} tokens, not data.seq_len")
    return {**spec_doc, "data": data}, encode_pool(samples)
