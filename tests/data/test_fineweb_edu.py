"""FineWeb-Edu's published Parquet layout, read by ``data prepare`` with a score filter.

The fixture is written here in FineWeb-Edu's column layout (text, id, dump, url,
file_path, language, language_score, token_count, score, int_score). It is NOT FineWeb-Edu
data: its text is the repository's FineWeb rows (tests/assets/fineweb_train.jsonl) and its
scores are made up for the test; the file's schema metadata says so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hypertrain.cli import main
from hypertrain.data import LoadedTokenizer, PrepareOptions, prepare
from hypertrain.data.corpus import CorpusStats, read_pieces
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.data.scores import FINEWEB_EDU_COLUMNS, ScoreError, ScoreFilter

SCORES = [0.9, 1.7, 2.4, 2.2, 3.1, 3.6, 4.4, 4.8]  # made up; int_score = round(score)
LABEL = (
    b"fixture in FineWeb-Edu's layout: text from tests/assets/fineweb_train.jsonl, scores made up"
)


def _texts(assets_dir: Path) -> list[str]:
    lines = (assets_dir / "fineweb_train.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["text"] for line in lines]


def _write(path: Path, texts: list[str], scores: list[float | None], **drop: bool) -> Path:
    n = len(texts)
    columns = {
        "text": texts,
        "id": [f"<urn:uuid:fixture-{i}>" for i in range(n)],
        "dump": ["CC-MAIN-2024-10"] * n,
        "url": [f"https://example.org/{i}" for i in range(n)],
        "file_path": ["fixture.warc.gz"] * n,
        "language": ["en"] * n,
        "language_score": [0.9] * n,
        "token_count": [len(t.split()) for t in texts],
        "score": scores,
        "int_score": [None if s is None else round(s) for s in scores],
    }
    table = pa.table({k: v for k, v in columns.items() if not drop.get(k)})
    pq.write_table(table.replace_schema_metadata({b"fixture": LABEL}), path)
    return path


@pytest.fixture()
def edu_file(assets_dir: Path, tmp_path: Path) -> Path:
    return _write(tmp_path / "000_00000.parquet", _texts(assets_dir), list(SCORES))


def test_the_fixture_has_the_published_columns(edu_file: Path) -> None:
    schema = pq.read_schema(edu_file)
    assert tuple(schema.names) == FINEWEB_EDU_COLUMNS
    assert schema.field("int_score").type == pa.int64() and schema.metadata[b"fixture"] == LABEL


@pytest.mark.parametrize(("sf", "kept"), [
    (None, 8), (ScoreFilter("int_score", 3), 4), (ScoreFilter("score", 3.5), 3),
    (ScoreFilter("int_score", 6), 0),
])  # fmt: skip
def test_rows_below_the_minimum_are_dropped_and_counted(
    edu_file: Path, assets_dir: Path, sf: ScoreFilter | None, kept: int
) -> None:
    stats = CorpusStats()
    docs = [p.text for p in read_pieces([edu_file], stats, score_filter=sf)]

    def kept_row(score: float) -> bool:
        return sf is None or (round(score) if sf.column == "int_score" else score) >= sf.minimum

    expected = [t for t, s in zip(_texts(assets_dir), SCORES, strict=True) if kept_row(s)]
    assert docs == expected and len(docs) == kept
    assert stats.documents == kept and stats.filtered_documents == 8 - kept


def test_jsonl_rows_filter_the_same_way(tmp_path: Path, assets_dir: Path) -> None:
    path = tmp_path / "edu.jsonl"
    rows = [
        {"text": t, "int_score": round(s)} for t, s in zip(_texts(assets_dir), SCORES, strict=True)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    stats = CorpusStats()
    docs = list(read_pieces([path], stats, score_filter=ScoreFilter("int_score", 3)))
    assert len(docs) == 4 and stats.filtered_documents == 4


def test_prepare_records_the_filter_in_the_descriptor(
    edu_file: Path, tokenizer: LoadedTokenizer, tmp_path: Path
) -> None:
    opts = PrepareOptions(heldout_fraction=0.0, score_filter=ScoreFilter("int_score", 3))
    desc = prepare([edu_file], tokenizer, 32, tmp_path / "edu", opts)
    assert desc.corpus.documents == 4 and desc.corpus.filtered_documents == 4
    assert desc.corpus.score_filter == "int_score >= 3"
    plain = prepare(
        [edu_file], tokenizer, 32, tmp_path / "plain", PrepareOptions(heldout_fraction=0.0)
    )
    assert plain.dataset_root != desc.dataset_root
    raw = json.loads((tmp_path / "plain" / DESCRIPTOR_NAME).read_text())
    assert "score_filter" not in raw["corpus"] and "filtered_documents" not in raw["corpus"]


def test_cli_prepares_a_filtered_shard_set(
    edu_file: Path, tokenizer_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ds"
    args = ["data", "prepare", str(edu_file), "--tokenizer", str(tokenizer_file),
            "--seq-len", "32", "--out", str(out), "--min-int-score", "3"]  # fmt: skip
    assert main(args) == 0
    assert "int_score >= 3 (dropped: 4)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*args, "--min-score", "3.5"])  # the two filters are exclusive


def test_bad_scores_and_files_are_refused(
    assets_dir: Path, tmp_path: Path, shakespeare_slice: Path
) -> None:
    texts = _texts(assets_dir)[:2]
    cases = {
        "no-column.parquet": _write(tmp_path / "a.parquet", texts, [3.0, 4.0], int_score=True),
        "null.parquet": _write(tmp_path / "b.parquet", texts, [3.0, None]),
    }
    for path in cases.values():
        with pytest.raises(ScoreError):
            list(read_pieces([path], CorpusStats(), score_filter=ScoreFilter("int_score", 3)))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a b", "int_score": "high"}\n{"text": "c", "int_score": true}\n')
    with pytest.raises(ScoreError, match="must be a number"):
        list(read_pieces([bad], CorpusStats(), score_filter=ScoreFilter("int_score", 3)))
    with pytest.raises(ScoreError, match="no int_score"):
        list(
            read_pieces(
                [shakespeare_slice], CorpusStats(), score_filter=ScoreFilter("int_score", 3)
            )
        )
    for column, minimum in (("stars", 3.0), ("score", float("nan")), ("score", True)):
        with pytest.raises(ScoreError):
            ScoreFilter(column, minimum)  # type: ignore[arg-type]
    assert issubclass(ScoreError, ValueError)
