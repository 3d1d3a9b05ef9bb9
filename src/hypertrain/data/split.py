"""The held-out split: which samples are reserved for the global evaluation loss.

A sample is held out when the first 8 bytes of its sample hash, read as a big-endian
unsigned integer, fall below ``heldout_ppm * 2**64 // 10**6``. The choice depends only
on the sample's bytes, so anyone holding the sample hashes recomputes it, and no one
can steer a sample into or out of the split without changing its content.
Held-out samples are never assignable for training: assignment permutes *dense
training positions* ``[0, train_count)`` and :meth:`Split.train_ids` maps those to
sample ids, skipping held-out ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from hypertrain.data.errors import AssignmentError, DataError

PPM: Final = 1_000_000
DEFAULT_HELDOUT_PPM: Final = 10_000  # 1 %

IdArray = npt.NDArray[np.uint64]


def heldout_threshold(heldout_ppm: int) -> int:
    """Sample hashes whose 64-bit prefix is below this are held out."""
    if not 0 <= heldout_ppm < PPM:
        raise DataError(f"heldout fraction must be in [0, 1), got {heldout_ppm} ppm")
    return heldout_ppm * (1 << 64) // PPM


def heldout_mask(sample_hashes: npt.NDArray[np.uint8], heldout_ppm: int) -> npt.NDArray[np.bool_]:
    """Boolean mask over an ``(N, 32)`` array of sample hashes: True where held out."""
    prefixes = np.ascontiguousarray(sample_hashes[:, :8]).view(">u8").reshape(-1)
    return np.asarray(prefixes < np.uint64(heldout_threshold(heldout_ppm)))


@dataclass(frozen=True, slots=True)
class Split:
    """Held-out ids of a dataset of ``sample_count`` samples (sorted, ``uint64``)."""

    sample_count: int
    heldout_ids: IdArray

    @classmethod
    def from_hashes(cls, sample_hashes: npt.NDArray[np.uint8], heldout_ppm: int) -> Split:
        mask = heldout_mask(sample_hashes, heldout_ppm)
        return cls(len(mask), np.flatnonzero(mask).astype(np.uint64))

    @property
    def train_count(self) -> int:
        return self.sample_count - len(self.heldout_ids)

    def is_heldout(self, sample_id: int) -> bool:
        pos = int(np.searchsorted(self.heldout_ids, sample_id))
        return pos < len(self.heldout_ids) and int(self.heldout_ids[pos]) == sample_id

    def train_ids(self, positions: npt.ArrayLike) -> IdArray:
        """Sample ids of dense training positions (the j-th id that is not held out)."""
        pos = np.asarray(positions, dtype=np.uint64)
        if pos.size and int(pos.max()) >= self.train_count:
            raise AssignmentError(
                f"training position {int(pos.max())} out of range for {self.train_count}"
            )
        # gaps[k] = number of training ids below heldout_ids[k]
        gaps = self.heldout_ids - np.arange(len(self.heldout_ids), dtype=np.uint64)
        return pos + np.searchsorted(gaps, pos, side="right").astype(np.uint64)
