"""Streaming document readers for plain text, JSON lines and Parquet corpora.

A corpus is a list of files read in order. Each file yields *pieces*: slices of text
that belong to one document, the last one flagged ``end_of_document``. Nothing reads a
whole file into memory: text is read line by line, JSON lines record by record, and
Parquet in record batches of the ``text`` column only. Pieces are what the tokenizer
encodes, so how a file is cut into pieces is part of the dataset's bytes:

* ``.txt``: the whole file is one document, cut after a blank line once a piece holds
  at least :data:`PIECE_CHARS` characters (or at :data:`MAX_PIECE_CHARS` regardless);
* ``.jsonl``: one document per line, a JSON object with a string ``text`` field;
* ``.parquet``: one document per row of the ``text`` column (string or binary).

With a :class:`~hypertrain.data.scores.ScoreFilter` (FineWeb-Edu's ``score`` or
``int_score``), JSON-lines and Parquet rows below the minimum are dropped and counted in
``CorpusStats.filtered_documents``; a ``.txt`` file has no score and is refused.

A document is empty when it has no non-whitespace character. Empty documents are
counted in :class:`CorpusStats` and dropped (policy ``"count"``) or refused with
:class:`EmptyDocumentError` (policy ``"error"``); they are never dropped silently.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from hypertrain.data.errors import (
    CorpusError,
    EmptyDocumentError,
    EncodingError,
    MissingTextColumnError,
)
from hypertrain.data.scores import ScoreError, ScoreFilter

PIECE_CHARS: Final = 1 << 16
MAX_PIECE_CHARS: Final = 1 << 22
PARQUET_BATCH_ROWS: Final = 1024
SUFFIXES: Final = (".txt", ".jsonl", ".parquet")

EmptyPolicy = Literal["count", "error"]


@dataclass(frozen=True, slots=True)
class Piece:
    """A slice of one document's text; the last slice has ``end_of_document``."""

    text: str
    end_of_document: bool


@dataclass(slots=True)
class CorpusStats:
    """What reading the corpus saw: every dropped document is counted here."""

    documents: int = 0
    empty_documents: int = 0
    filtered_documents: int = 0  # rows below the score filter's minimum


def read_pieces(
    paths: Iterable[Path],
    stats: CorpusStats,
    *,
    empty_policy: EmptyPolicy = "count",
    score_filter: ScoreFilter | None = None,
) -> Iterator[Piece]:
    """All non-empty documents of ``paths`` that pass ``score_filter``, in order, as pieces."""
    for path in paths:
        held: list[str] = []  # leading whitespace-only pieces of the current document
        seen_text = False
        for piece in _file_pieces(path, score_filter, stats):
            if not seen_text:
                if not piece.text or piece.text.isspace():
                    held.append(piece.text)
                    if piece.end_of_document:
                        held = []
                        _count_empty(path, stats, empty_policy)
                    continue
                if held:
                    piece = Piece("".join(held) + piece.text, piece.end_of_document)
                    held = []
                seen_text = True
            yield piece
            if piece.end_of_document:
                stats.documents += 1
                seen_text = False


def _count_empty(path: Path, stats: CorpusStats, policy: EmptyPolicy) -> None:
    stats.empty_documents += 1
    if policy == "error":
        raise EmptyDocumentError(
            f"{path.name}: empty document (number {stats.documents + stats.empty_documents})"
        )


def _file_pieces(path: Path, sf: ScoreFilter | None, stats: CorpusStats) -> Iterator[Piece]:
    suffix = path.suffix.lower()
    if suffix == ".txt":
        if sf is not None:
            raise ScoreError(f"{path.name}: a .txt file has no {sf.column} to filter on")
        return _txt_pieces(path)
    if suffix == ".jsonl":
        return (Piece(t, True) for t in _jsonl_texts(path, sf, stats))
    if suffix == ".parquet":
        return (Piece(t, True) for t in _parquet_texts(path, sf, stats))
    raise CorpusError(f"{path.name}: unsupported corpus file type (use one of {SUFFIXES})")


def _txt_pieces(path: Path) -> Iterator[Piece]:
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    buf: list[str] = []
    size = offset = 0
    with path.open("rb") as f:
        while chunk := f.readline(MAX_PIECE_CHARS):
            text = _decode(decoder, chunk, path, offset)
            offset += len(chunk)
            buf.append(text)
            size += len(text)
            if (size >= PIECE_CHARS and not text.strip()) or size >= MAX_PIECE_CHARS:
                yield Piece("".join(buf), False)
                buf, size = [], 0
        buf.append(_decode(decoder, b"", path, offset, final=True))
    yield Piece("".join(buf), True)


def _decode(
    decoder: codecs.IncrementalDecoder, data: bytes, path: Path, offset: int, final: bool = False
) -> str:
    try:
        return str(decoder.decode(data, final))
    except UnicodeDecodeError as exc:
        raise EncodingError(
            f"{path.name}: invalid UTF-8 near byte {offset + exc.start}: {exc.reason}"
        ) from exc


def _jsonl_texts(path: Path, sf: ScoreFilter | None, stats: CorpusStats) -> Iterator[str]:
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EncodingError(
                    f"{path.name}:{line_no}: invalid UTF-8 at byte {exc.start} of the line"
                ) from exc
            if not line.strip():
                yield ""
                continue
            text, score = _record_text(path, line_no, line, sf)
            if sf is not None and not sf.keeps(score, f"{path.name}:{line_no}"):
                stats.filtered_documents += 1
                continue
            yield text


def _record_text(path: Path, line_no: int, line: str, sf: ScoreFilter | None) -> tuple[str, object]:
    """(the record's text, its score under ``sf`` or None)."""
    try:
        record = json.loads(line, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path.name}:{line_no}: malformed JSON: {exc.msg}") from exc
    if not isinstance(record, dict):
        raise CorpusError(f"{path.name}:{line_no}: a record must be a JSON object")
    if "text" not in record:
        raise MissingTextColumnError(f"{path.name}:{line_no}: record has no 'text' field")
    text = record["text"]
    if not isinstance(text, str):
        raise CorpusError(f"{path.name}:{line_no}: 'text' must be a string")
    _check_encodable(text, f"{path.name}:{line_no}")
    return text, None if sf is None else record.get(sf.column)


def _refuse_constant(name: str) -> Any:
    raise CorpusError(f"{name} is not valid JSON")


def _check_encodable(text: str, where: str) -> None:
    """JSON escapes can smuggle lone surrogates, which are not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EncodingError(f"{where}: text is not valid Unicode ({exc.reason})") from exc


def _parquet_texts(path: Path, sf: ScoreFilter | None, stats: CorpusStats) -> Iterator[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pfile = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise CorpusError(f"{path.name}: not a readable Parquet file: {exc}") from exc
    schema = pfile.schema_arrow
    if "text" not in schema.names:
        raise MissingTextColumnError(
            f"{path.name}: Parquet file has no 'text' column (columns: {schema.names})"
        )
    binary = pa.types.is_binary(schema.field("text").type) or pa.types.is_large_binary(
        schema.field("text").type
    )
    if sf is not None and sf.column not in schema.names:
        raise ScoreError(f"{path.name}: Parquet file has no {sf.column!r} column to filter on")
    columns = ["text"] if sf is None else ["text", sf.column]
    row = 0
    for batch in pfile.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
        scores: list[Any] = [] if sf is None else batch.column(1).to_pylist()
        for i, value in enumerate(_column_values(batch.column(0), path, row)):
            if sf is not None and not sf.keeps(scores[i], f"{path.name}: row {row}"):
                stats.filtered_documents += 1
            else:
                yield _parquet_value(value, binary, path, row)
            row += 1


def _column_values(column: Any, path: Path, row: int) -> list[Any]:
    try:
        return list(column.to_pylist())
    except UnicodeDecodeError as exc:
        raise EncodingError(f"{path.name}: invalid UTF-8 in rows from {row}") from exc


def _parquet_value(value: Any, binary: bool, path: Path, row: int) -> str:
    if value is None:
        return ""
    if binary:
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EncodingError(
                f"{path.name}: row {row}: invalid UTF-8 at byte {exc.start}"
            ) from exc
    if not isinstance(value, str):
        raise CorpusError(f"{path.name}: row {row}: 'text' must be a string column")
    return value
