"""Sample bytes, sample hashes, and checking a sample against a dataset root.

A sample is exactly ``seq_len`` token ids. Its canonical bytes are the ids as
little-endian ``uint32`` (whatever width the shard stores them in), and its hash is
``tagged_hash(SAMPLE, canonical bytes)``. The dataset root is the Merkle root
(:mod:`hypertrain.protocol.merkle`) whose leaf data, in sample-id order, are these
32-byte sample hashes. A consumer handed ``(sample_id, tokens, proof)`` checks all
three against the root with :func:`verify_sample` before training on the tokens.
"""

from __future__ import annotations

import hashlib
from typing import Final

import numpy as np
import numpy.typing as npt

from hypertrain.data.errors import SampleProofError
from hypertrain.protocol import domains
from hypertrain.protocol.errors import MerkleError
from hypertrain.protocol.merkle import MerkleProof, leaf_hash, verify_proof_for_hash

_SAMPLE_PREFIX: Final = domains.tagged_prefix(domains.SAMPLE)

TokenArray = npt.NDArray[np.unsignedinteger]


def sample_bytes(tokens: npt.ArrayLike) -> bytes:
    """Canonical bytes of one sample: its ids as little-endian uint32."""
    return np.ascontiguousarray(tokens, dtype="<u4").tobytes()


def sample_hash(tokens: npt.ArrayLike) -> bytes:
    """The 32-byte sample hash (a Merkle leaf's data)."""
    return hashlib.sha256(_SAMPLE_PREFIX + sample_bytes(tokens)).digest()


def sample_hashes(samples: npt.NDArray[np.unsignedinteger]) -> bytes:
    """Concatenated hashes of the rows of a ``(k, seq_len)`` array."""
    wide = np.ascontiguousarray(samples, dtype="<u4")
    sha, prefix = hashlib.sha256, _SAMPLE_PREFIX
    return b"".join([sha(prefix + row.tobytes()).digest() for row in wide])


def verify_sample(root: bytes, sample_id: int, tokens: npt.ArrayLike, proof: MerkleProof) -> None:
    """Raise :class:`SampleProofError` unless ``tokens`` is sample ``sample_id`` under ``root``."""
    if proof.index != sample_id:
        raise SampleProofError(f"proof is for sample {proof.index}, not sample {sample_id}")
    try:
        verify_proof_for_hash(root, leaf_hash(sample_hash(tokens)), proof)
    except MerkleError as exc:
        raise SampleProofError(f"sample {sample_id} does not verify: {exc}") from exc
