"""Reading a prepared dataset: O(1) memory-mapped samples, proofs and integrity checks.

Opening a :class:`Dataset` parses the descriptor, checks that every shard has the
size the descriptor implies and that the sample-hash file matches its recorded hash,
and maps the shards read-only. :meth:`Dataset.sample` is then a slice of a memory map.
The Merkle tree over the sample hashes is built on first use (about 64 bytes per
sample) and its root must equal the descriptor's, so a proof served from here is
always a proof for the published root. :meth:`Dataset.verify` re-hashes every shard
and every sample: the full audit behind ``hypertrain data verify``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import numpy.typing as npt

from hypertrain.data.descriptor import DatasetDescriptor, read_descriptor
from hypertrain.data.errors import (
    DescriptorError,
    SampleProofError,
    SampleRangeError,
    ShardIntegrityError,
)
from hypertrain.data.samples import sample_hash, sample_hashes
from hypertrain.data.split import Split
from hypertrain.protocol.merkle import MerkleProof, MerkleTree

DIGEST_SIZE = 32
_READ_BLOCK = 1 << 22


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()


class Dataset:
    """A prepared dataset opened from its descriptor file."""

    def __init__(self, descriptor_path: Path, *, expected_sha256: str | None = None) -> None:
        self.descriptor: DatasetDescriptor = read_descriptor(descriptor_path, expected_sha256)
        self.root = bytes.fromhex(self.descriptor.dataset_root)
        self._dir = descriptor_path.parent
        self._dtype = np.dtype(self.descriptor.token_dtype).newbyteorder("<")
        self._shards = [self._map_shard(s.file, s.sample_count) for s in self.descriptor.shards]
        self._hashes = self._load_hashes()
        self._tree: MerkleTree | None = None
        self._split: Split | None = None

    @property
    def sample_count(self) -> int:
        return self.descriptor.sample_count

    @property
    def seq_len(self) -> int:
        return self.descriptor.seq_len

    def __len__(self) -> int:
        return self.sample_count

    def _map_shard(self, name: str, count: int) -> np.memmap[tuple[int, int], np.dtype[np.uint]]:
        path = self._dir / name
        expected = count * self.seq_len * self._dtype.itemsize
        try:
            size = path.stat().st_size
        except OSError as exc:
            raise DescriptorError(f"shard {name} is missing: {exc.strerror}") from exc
        if size != expected:
            raise ShardIntegrityError(f"shard {name} is {size} bytes, expected {expected}")
        return np.memmap(path, dtype=self._dtype, mode="r", shape=(count, self.seq_len))

    def _load_hashes(self) -> npt.NDArray[np.uint8]:
        info = self.descriptor.sample_hashes
        path = self._dir / info.file
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DescriptorError(f"sample-hash file {info.file} is missing") from exc
        if len(data) != self.sample_count * DIGEST_SIZE or (
            hashlib.sha256(data).hexdigest() != info.sha256
        ):
            raise ShardIntegrityError(f"sample-hash file {info.file} does not match its hash")
        return np.frombuffer(data, dtype=np.uint8).reshape(-1, DIGEST_SIZE)

    def _check_id(self, sample_id: int) -> None:
        if not 0 <= sample_id < self.sample_count:
            raise SampleRangeError(f"sample id {sample_id} out of range [0, {self.sample_count})")

    def sample(self, sample_id: int) -> npt.NDArray[np.unsignedinteger]:
        """The ``seq_len`` token ids of one sample (a read-only view; O(1))."""
        self._check_id(sample_id)
        per_shard = self.descriptor.samples_per_shard
        return np.asarray(self._shards[sample_id // per_shard][sample_id % per_shard])

    def sample_hash(self, sample_id: int) -> bytes:
        self._check_id(sample_id)
        return bytes(self._hashes[sample_id].tobytes())

    def tree(self) -> MerkleTree:
        """The Merkle tree over sample hashes, checked against the descriptor's root."""
        if self._tree is None:
            tree = MerkleTree.from_leaves(bytes(row) for row in self._hashes)
            if tree.root != self.root:
                raise ShardIntegrityError("sample hashes do not lead to the dataset root")
            self._tree = tree
        return self._tree

    def proof(self, sample_id: int) -> MerkleProof:
        """Inclusion proof of sample ``sample_id`` under the dataset root."""
        self._check_id(sample_id)
        return self.tree().proof(sample_id)

    def verified_sample(self, sample_id: int) -> npt.NDArray[np.unsignedinteger]:
        """The sample, after checking its bytes against the hash committed by the root."""
        tokens = self.sample(sample_id)
        self.tree()
        if sample_hash(tokens) != self.sample_hash(sample_id):
            raise SampleProofError(f"sample {sample_id} bytes do not match its committed hash")
        return tokens

    def split(self) -> Split:
        """The held-out split recomputed from the sample hashes (checked against the descriptor)."""
        if self._split is None:
            split = Split.from_hashes(self._hashes, self.descriptor.split.heldout_ppm)
            if split.train_count != self.descriptor.split.train_count:
                raise DescriptorError("held-out split disagrees with the descriptor's counts")
            self._split = split
        return self._split

    def verify(self) -> None:
        """Re-hash every shard and every sample; raise on the first mismatch."""
        per_shard = self.descriptor.samples_per_shard
        for k, (info, shard) in enumerate(zip(self.descriptor.shards, self._shards, strict=True)):
            if _file_sha256(self._dir / info.file) != info.sha256:
                raise ShardIntegrityError(f"shard {info.file} does not match its hash")
            start = k * per_shard
            recorded = self._hashes[start : start + len(shard)].tobytes()
            if sample_hashes(np.asarray(shard)) != recorded:
                raise ShardIntegrityError(f"samples in {info.file} do not match their hashes")
        self.tree()
        self.split()
