"""Writing token shards, the sample-hash file and the root, one sample batch at a time.

A shard ``shard-NNNNN.bin`` is ``sample_count × seq_len`` token ids, row-major,
little-endian ``uint16`` or ``uint32``, with no header (so a reader memory-maps it).
Every shard but the last holds exactly ``samples_per_shard`` samples; sample ``i``
lives in shard ``i // samples_per_shard`` at row ``i % samples_per_shard``. The
sample-hash file holds the 32-byte hash of every sample in id order. Memory held by
the writer is one shard hasher plus O(log n) for the root, whatever the corpus size.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

import numpy as np
import numpy.typing as npt

from hypertrain.data.descriptor import HashFileInfo, ShardInfo, TokenDtype
from hypertrain.data.samples import sample_hashes
from hypertrain.data.stream_root import StreamingRoot

HASHES_NAME: Final = "sample_hashes.bin"
DIGEST_SIZE: Final = 32


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.bin"


@dataclass(frozen=True, slots=True)
class WrittenShards:
    shards: list[ShardInfo]
    hashes: HashFileInfo
    root: bytes
    sample_count: int


class ShardWriter:
    """Append ``(k, seq_len)`` sample arrays; :meth:`close` returns what was written."""

    def __init__(self, out_dir: Path, seq_len: int, dtype: TokenDtype, samples_per_shard: int):
        self._dir = out_dir
        self._seq_len = seq_len
        self._dtype = np.dtype(dtype).newbyteorder("<")
        self._per_shard = samples_per_shard
        self._shards: list[ShardInfo] = []
        self._file: IO[bytes] | None = None
        self._hasher = hashlib.sha256()
        self._in_shard = 0
        self._count = 0
        self._root = StreamingRoot()
        self._hash_file = (out_dir / HASHES_NAME).open("wb")
        self._hash_hasher = hashlib.sha256()

    def add(self, samples: npt.NDArray[np.unsignedinteger]) -> bytes:
        """Write samples in order; returns their concatenated sample hashes."""
        assert samples.ndim == 2 and samples.shape[1] == self._seq_len
        hashes = sample_hashes(samples)
        for k in range(len(samples)):
            self._root.add(hashes[k * DIGEST_SIZE : (k + 1) * DIGEST_SIZE])
        self._hash_file.write(hashes)
        self._hash_hasher.update(hashes)
        data = np.ascontiguousarray(samples, dtype=self._dtype)
        start = 0
        while start < len(data):
            take = min(self._per_shard - self._in_shard, len(data) - start)
            self._write(data[start : start + take].tobytes())
            self._in_shard += take
            start += take
            if self._in_shard == self._per_shard:
                self._finish_shard()
        self._count += len(data)
        return hashes

    def _write(self, data: bytes) -> None:
        if self._file is None:
            self._file = (self._dir / shard_name(len(self._shards))).open("wb")
        self._file.write(data)
        self._hasher.update(data)

    def _finish_shard(self) -> None:
        assert self._file is not None
        self._file.close()
        name = shard_name(len(self._shards))
        info = ShardInfo(file=name, sample_count=self._in_shard, sha256=self._hasher.hexdigest())
        self._shards.append(info)
        self._file, self._hasher, self._in_shard = None, hashlib.sha256(), 0

    def abort(self) -> None:
        """Close open files after a failure (the output directory is then incomplete)."""
        if self._file is not None:
            self._file.close()
        self._hash_file.close()

    def close(self) -> WrittenShards:
        if self._in_shard:
            self._finish_shard()
        self._hash_file.close()
        hashes = HashFileInfo(file=HASHES_NAME, sha256=self._hash_hasher.hexdigest())
        return WrittenShards(self._shards, hashes, self._root.root, self._count)
