"""What the trainer consumes: an island's assigned samples, in assignment order.

The order of ids in an assignment is the training order; the manifest's layout
(ranks × micro-batches × micro-batch size) cuts it into micro-batches, so iteration
here never reorders. Each sample is checked against the dataset root's committed hash
before it is handed out, unless the caller opts out (e.g. after a full verify).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from hypertrain.data.dataset import Dataset
from hypertrain.data.errors import DataError


def iter_samples(
    dataset: Dataset, sample_ids: Sequence[int] | npt.NDArray[np.uint64], *, verify: bool = True
) -> Iterator[tuple[int, npt.NDArray[np.int64]]]:
    """Yield ``(sample_id, tokens)`` for each id in order; tokens as int64 (for embeddings)."""
    read = dataset.verified_sample if verify else dataset.sample
    for sid in sample_ids:
        yield int(sid), read(int(sid)).astype(np.int64)


def iter_batches(
    dataset: Dataset,
    sample_ids: Sequence[int] | npt.NDArray[np.uint64],
    batch_size: int,
    *,
    verify: bool = True,
) -> Iterator[tuple[list[int], npt.NDArray[np.int64]]]:
    """Consecutive ``(ids, (B, seq_len) tokens)`` batches; the last one may be short."""
    if batch_size < 1:
        raise DataError(f"batch_size must be >= 1, got {batch_size}")
    ids: list[int] = []
    rows: list[npt.NDArray[np.int64]] = []
    for sid, tokens in iter_samples(dataset, sample_ids, verify=verify):
        ids.append(sid)
        rows.append(tokens)
        if len(ids) == batch_size:
            yield ids, np.stack(rows)
            ids, rows = [], []
    if ids:
        yield ids, np.stack(rows)
