"""Streaming readers for .txt, .jsonl and .parquet; every bad input gives a typed error."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hypertrain.data.corpus import PIECE_CHARS, CorpusStats, read_pieces
from hypertrain.data.errors import (
    CorpusError,
    EmptyDocumentError,
    EncodingError,
    MissingTextColumnError,
)


def _docs(paths: list[Path], policy: str = "count") -> tuple[list[str], CorpusStats]:
    stats = CorpusStats()
    docs: list[str] = []
    current = ""
    for piece in read_pieces(paths, stats, empty_policy=policy):  # type: ignore[arg-type]
        current += piece.text
        if piece.end_of_document:
            docs.append(current)
            current = ""
    return docs, stats


def test_txt_is_one_document_cut_into_pieces(shakespeare_slice: Path) -> None:
    stats = CorpusStats()
    pieces = list(read_pieces([shakespeare_slice], stats))
    assert len(pieces) > 1
    assert all(not p.end_of_document for p in pieces[:-1]) and pieces[-1].end_of_document
    assert all(len(p.text) < 2 * PIECE_CHARS for p in pieces)
    assert "".join(p.text for p in pieces) == shakespeare_slice.read_text(encoding="utf-8")
    assert stats.documents == 1


def test_jsonl_one_document_per_line(assets_dir: Path) -> None:
    docs, stats = _docs([assets_dir / "fineweb_train.jsonl"])
    assert len(docs) == stats.documents == 8
    assert docs[0].startswith("However it is not simply")


def test_parquet_text_column_streams_rows(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    texts = [f"document number {i}" for i in range(2500)]
    table = pa.table({"id": list(range(2500)), "text": texts})
    pq.write_table(table, path, row_group_size=700)
    docs, stats = _docs([path])
    assert docs == texts and stats.documents == 2500


def test_empty_documents_are_counted_or_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "a"}\n{"text": ""}\n{"text": "  \\n "}\n\n{"text": "b"}\n')
    docs, stats = _docs([path])
    assert docs == ["a", "b"]
    assert (stats.documents, stats.empty_documents) == (2, 3)
    with pytest.raises(EmptyDocumentError, match="empty document"):
        _docs([path], "error")
    empty_txt = tmp_path / "e.txt"
    empty_txt.write_text("\n\n   \n")
    docs, stats = _docs([empty_txt])
    assert docs == [] and stats.empty_documents == 1


def test_parquet_null_text_counts_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["x", None, "y"]}), path)
    docs, stats = _docs([path])
    assert docs == ["x", "y"] and stats.empty_documents == 1


def test_missing_text_column(tmp_path: Path) -> None:
    jl = tmp_path / "c.jsonl"
    jl.write_text('{"text": "ok"}\n{"body": "no text"}\n')
    with pytest.raises(MissingTextColumnError, match=r"c\.jsonl:2"):
        _docs([jl])
    pqf = tmp_path / "c.parquet"
    pq.write_table(pa.table({"content": ["x"]}), pqf)
    with pytest.raises(MissingTextColumnError, match="no 'text' column"):
        _docs([pqf])


def test_non_utf8_bytes_are_refused(tmp_path: Path) -> None:
    txt = tmp_path / "c.txt"
    txt.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(EncodingError, match="invalid UTF-8 near byte 14"):
        _docs([txt])
    jl = tmp_path / "c.jsonl"
    jl.write_bytes(b'{"text": "ok"}\n{"text": "bad \xc3\x28"}\n')
    with pytest.raises(EncodingError, match=r"c\.jsonl:2"):
        _docs([jl])
    jl.write_bytes(b'{"text": "lone \\ud800 surrogate"}\n')
    with pytest.raises(CorpusError, match="surrogate"):
        _docs([jl])
    pqf = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": pa.array([b"ok", b"\xff"], type=pa.binary())}), pqf)
    with pytest.raises(EncodingError, match="row 1"):
        _docs([pqf])


def test_malformed_records_and_files(tmp_path: Path) -> None:
    jl = tmp_path / "c.jsonl"
    jl.write_text('{"text": "ok"\n')
    with pytest.raises(CorpusError, match="malformed JSON"):
        _docs([jl])
    jl.write_text('["text"]\n')
    with pytest.raises(CorpusError, match="JSON object"):
        _docs([jl])
    jl.write_text('{"text": 5}\n')
    with pytest.raises(CorpusError, match="must be a string"):
        _docs([jl])
    other = tmp_path / "c.csv"
    other.write_text("text\n")
    with pytest.raises(CorpusError, match="unsupported"):
        _docs([other])
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    with pytest.raises(CorpusError, match="not a readable Parquet"):
        _docs([broken])
