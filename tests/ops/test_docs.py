"""The generated contract docs (docs/schemas, the route index) match the code."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypertrain.ops.docs import BEGIN, END, main, routes_block, service_app, stale

DOCS = Path(__file__).parents[2] / "docs"


def test_checked_in_generated_docs_are_current() -> None:
    assert stale(DOCS) == [], "generated docs are stale: run `make docs`"


def test_the_route_index_lists_every_route_of_the_app() -> None:
    app = service_app()
    block = routes_block(app)
    spec_paths = service_app().openapi()["paths"]
    for path, methods in spec_paths.items():
        for method in methods:
            assert f"`{method.upper()} {path}`" in block, (method, path)
    for path in ("/dashboard/", "/v1/weights/latest", "/admin/v1/competitions"):
        assert f" {path}` |" in block, path


def test_drift_is_caught_and_regeneration_is_one_command(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    shutil.copytree(DOCS / "schemas", root / "schemas")
    text = (DOCS / "challenge-routes.md").read_text(encoding="utf-8")
    head = text.split(BEGIN, 1)[0]
    (root / "challenge-routes.md").write_text(head + BEGIN + "\n| `GET /gone` |\n" + END + "\n")
    (root / "schemas" / "verdict.schema.json").write_text("{}\n")
    (root / "schemas" / "retired.schema.json").write_text("{}\n")
    assert sorted(Path(p).name for p in stale(root)) == [
        "challenge-routes.md",
        "retired.schema.json",
        "verdict.schema.json",
    ]
    assert main(["--root", str(root), "--check"]) == 1
    assert main(["--root", str(root)]) == 0
    assert stale(root) == [] and not (root / "schemas" / "retired.schema.json").exists()
    assert (root / "challenge-routes.md").read_text(encoding="utf-8").startswith(head)
