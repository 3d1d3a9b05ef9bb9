from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.protocol.schema import base_models, main, schema_texts

SCHEMA_DIR = Path(__file__).parents[2] / "docs" / "schemas"


def test_checked_in_schemas_are_current() -> None:
    """The protocol's own schemas; tests/ops/test_docs.py checks the whole generated set."""
    expected = schema_texts(base_models())
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in SCHEMA_DIR.glob("*.schema.json")}
    stale = sorted(n for n in expected if on_disk.get(n) != expected[n])
    assert not stale, f"docs/schemas is stale (changed: {stale}); run: make docs"


def test_the_old_schema_command_names_the_one_that_writes_every_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(tmp_path)]) == 2
    assert "python -m hypertrain.ops.schemas DIR" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing half-written
