"""``python -m hypertrain.ops.schemas DIR`` writes exactly the schemas ``make docs`` does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypertrain.ops import docs, schemas

DOCS = Path(__file__).parents[2] / "docs"


def test_the_schema_command_writes_every_schema_make_docs_writes(tmp_path: Path) -> None:
    out = tmp_path / "schemas"
    done = subprocess.run(
        [sys.executable, "-m", "hypertrain.ops.schemas", str(out)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = {p.name: p.read_text(encoding="utf-8") for p in out.glob("*.schema.json")}
    generated = {
        p.name: text for p, text in docs.expected_files(DOCS).items() if p.parent.name == "schemas"
    }
    checked_in = {p.name for p in (DOCS / "schemas").glob("*.schema.json")}
    assert written == generated and set(written) == checked_in
    for domain in ("verdict", "dispute-open", "compete-score", "competition-spec"):
        assert f"{domain}.schema.json" in written, domain
    assert len(written) == len(schemas.schema_models())
