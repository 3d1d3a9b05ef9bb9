"""Corpus to dataset: tokenize, pack into fixed-length samples, shard, hash, describe.

Documents stream from :func:`hypertrain.data.corpus.read_pieces` and are encoded in
batches of about :data:`BATCH_CHARS` characters with the tokenizer's batch encoder.
Token ids are one stream in corpus order with the end-of-document id after each
document; the stream is cut into consecutive, non-overlapping samples of exactly
``seq_len`` ids (the trainer uses ``s[:-1]`` as inputs and ``s[1:]`` as targets). The
final partial sample is dropped and its size recorded. Memory is bounded by one batch
plus one shard hasher, so it does not grow with the corpus.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import queue
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from hypertrain.data.corpus import CorpusStats, EmptyPolicy, Piece, read_pieces
from hypertrain.data.descriptor import (
    DESCRIPTOR_NAME,
    CorpusInfo,
    DatasetDescriptor,
    SourceInfo,
    SplitInfo,
    dtype_for_vocab,
    write_descriptor,
)
from hypertrain.data.errors import DataError
from hypertrain.data.scores import ScoreFilter
from hypertrain.data.shards import ShardWriter, WrittenShards
from hypertrain.data.split import PPM, heldout_mask
from hypertrain.data.tokenizer import LoadedTokenizer

log = logging.getLogger(__name__)

BATCH_CHARS: Final = 1 << 20
DEFAULT_SAMPLES_PER_SHARD: Final = 8192
DEFAULT_HELDOUT_FRACTION: Final = 0.01


class Packer:
    """Concatenates token arrays and emits full ``(k, seq_len)`` sample blocks."""

    def __init__(self, seq_len: int) -> None:
        self.seq_len = seq_len
        self._rest = np.zeros(0, dtype=np.uint32)

    def feed(self, tokens: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
        stream = np.concatenate([self._rest, tokens]) if len(self._rest) else tokens
        full = len(stream) // self.seq_len * self.seq_len
        self._rest = stream[full:].copy()
        return stream[:full].reshape(-1, self.seq_len)

    @property
    def leftover(self) -> int:
        return len(self._rest)


def batch_pieces(pieces: Iterator[Piece]) -> Iterator[list[Piece]]:
    """Group pieces into encoder batches of about :data:`BATCH_CHARS` characters."""
    batch: list[Piece] = []
    chars = 0
    for piece in pieces:
        batch.append(piece)
        chars += len(piece.text)
        if chars >= BATCH_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


_DONE: Final = object()


def prefetch(items: Iterator[list[Piece]], depth: int = 2) -> Iterator[list[Piece]]:
    """Read the next batches in a thread while the caller encodes (order is kept).

    The tokenizer releases the GIL while encoding, so parsing the corpus overlaps it.
    An exception in the reader is re-raised here, in the consumer.
    """
    box: queue.Queue[object] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                if stop.is_set():
                    return
                box.put(item)
            box.put(_DONE)
        except BaseException as exc:  # handed to the consumer, not swallowed
            box.put(exc)

    thread = threading.Thread(target=produce, name="corpus-reader", daemon=True)
    thread.start()
    try:
        while (item := box.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on a full queue
            with contextlib.suppress(queue.Empty):
                box.get(timeout=0.05)
        thread.join()


def encode_pieces(tok: LoadedTokenizer, batch: list[Piece]) -> npt.NDArray[np.uint32]:
    """Token ids of a batch of pieces, with the end-of-document id after each document."""
    ids = tok.encode_batch([p.text for p in batch])
    eod = [tok.eod_id]
    parts = itertools.chain.from_iterable(
        (seq, eod) if p.end_of_document else (seq,) for seq, p in zip(ids, batch, strict=True)
    )
    return np.fromiter(itertools.chain.from_iterable(parts), dtype=np.uint32)


def _source_info(path: Path) -> SourceInfo:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
            size += len(block)
    return SourceInfo(name=path.name, size_bytes=size, sha256=digest.hexdigest())


@dataclass(frozen=True, slots=True)
class PrepareOptions:
    heldout_fraction: float = DEFAULT_HELDOUT_FRACTION
    samples_per_shard: int = DEFAULT_SAMPLES_PER_SHARD
    empty_policy: EmptyPolicy = "count"
    score_filter: ScoreFilter | None = None  # e.g. FineWeb-Edu's int_score >= 3

    @property
    def heldout_ppm(self) -> int:
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise DataError(f"heldout fraction must be in [0, 1), got {self.heldout_fraction}")
        return round(self.heldout_fraction * PPM)


def _check_args(inputs: Sequence[Path], seq_len: int, out_dir: Path, opts: PrepareOptions) -> None:
    if not inputs:
        raise DataError("no input files given")
    if seq_len < 2:
        raise DataError(f"seq_len must be >= 2, got {seq_len}")
    if opts.samples_per_shard < 1:
        raise DataError(f"samples_per_shard must be >= 1, got {opts.samples_per_shard}")
    if (out_dir / DESCRIPTOR_NAME).exists():
        raise DataError(f"{out_dir.name} already holds a dataset; use an empty directory")
    for path in inputs:
        if not path.is_file():
            raise DataError(f"input {path.name} is not a file")


def prepare(
    inputs: Sequence[Path],
    tokenizer: LoadedTokenizer,
    seq_len: int,
    out_dir: Path,
    options: PrepareOptions | None = None,
) -> DatasetDescriptor:
    """Build a dataset in ``out_dir`` (shards, hashes, ``dataset.json``) from ``inputs``."""
    opts = options or PrepareOptions()
    heldout_ppm = opts.heldout_ppm
    _check_args(inputs, seq_len, out_dir, opts)
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = [_source_info(p) for p in inputs]
    stats = CorpusStats()
    dtype = dtype_for_vocab(tokenizer.vocab_size)
    writer = ShardWriter(out_dir, seq_len, dtype, opts.samples_per_shard)
    packer = Packer(seq_len)
    tokens = heldout = 0
    try:
        pieces = read_pieces(
            inputs, stats, empty_policy=opts.empty_policy, score_filter=opts.score_filter
        )
        for batch in prefetch(batch_pieces(pieces)):
            ids = encode_pieces(tokenizer, batch)
            tokens += len(ids)
            hashes = writer.add(packer.feed(ids))
            digests = np.frombuffer(hashes, dtype=np.uint8).reshape(-1, 32)
            heldout += int(heldout_mask(digests, heldout_ppm).sum())
    except BaseException:
        writer.abort()
        raise
    written = writer.close()
    if written.sample_count == 0:
        raise DataError(f"corpus has {tokens} tokens, fewer than one sample of {seq_len}")
    if stats.empty_documents:
        log.warning(
            "dropped %d empty documents (recorded in the descriptor)", stats.empty_documents
        )
    descriptor = _describe(
        written, tokenizer, seq_len, opts, heldout, sources, stats, tokens, packer.leftover
    )
    write_descriptor(descriptor, out_dir / DESCRIPTOR_NAME)
    return descriptor


def _describe(
    written: WrittenShards,
    tokenizer: LoadedTokenizer,
    seq_len: int,
    opts: PrepareOptions,
    heldout: int,
    sources: list[SourceInfo],
    stats: CorpusStats,
    tokens: int,
    tail: int,
) -> DatasetDescriptor:
    return DatasetDescriptor(
        dataset_root=written.root.hex(),
        sample_count=written.sample_count,
        seq_len=seq_len,
        token_dtype=dtype_for_vocab(tokenizer.vocab_size),
        vocab_size=tokenizer.vocab_size,
        eod_id=tokenizer.eod_id,
        tokenizer_sha256=tokenizer.sha256,
        samples_per_shard=opts.samples_per_shard,
        shards=written.shards,
        sample_hashes=written.hashes,
        split=SplitInfo(
            heldout_ppm=opts.heldout_ppm,
            heldout_count=heldout,
            train_count=written.sample_count - heldout,
        ),
        corpus=CorpusInfo(
            sources=sources,
            documents=stats.documents,
            empty_documents=stats.empty_documents,
            filtered_documents=stats.filtered_documents,
            score_filter=None if opts.score_filter is None else opts.score_filter.describe(),
            tokens=tokens,
            tail_tokens_dropped=tail,
        ),
    )
