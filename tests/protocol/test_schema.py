from __future__ import annotations

from pathlib import Path

from hypertrain.protocol.schema import all_schemas, main

SCHEMA_DIR = Path(__file__).parents[2] / "docs" / "schemas"


def test_checked_in_schemas_are_current() -> None:
    """The protocol's own schemas; tests/ops/test_docs.py checks the whole generated set."""
    expected = all_schemas()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in SCHEMA_DIR.glob("*.schema.json")}
    stale = sorted(n for n in expected if on_disk.get(n) != expected[n])
    assert not stale, f"docs/schemas is stale (changed: {stale}); run: make docs"


def test_schema_cli_writes_files(tmp_path: Path) -> None:
    assert main([str(tmp_path)]) == 0
    assert (tmp_path / "envelope.schema.json").exists()
    assert main([]) == 2
