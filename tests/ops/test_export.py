"""``hypertrain run export`` refuses what it cannot export, in one line (the whole flow runs
in the recipe test, tests/ops/test_recipe.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypertrain.cli import main
from hypertrain.ops.export import ExportError, checked_tokenizer
from hypertrain.protocol.manifest import RunManifest
from tests.challenge.helpers import manifest_doc
from tests.ops.conftest import LiveService


def test_a_run_without_a_merge_has_nothing_to_export(
    live_service: LiveService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "run.json"
    manifest.write_text(json.dumps(manifest_doc()))
    create = ["challenge", "create-run", "--service-url", live_service.url]
    assert main([*create, "--admin-token-file", str(live_service.admin_token),
                 "--manifest", str(manifest)]) == 0  # fmt: skip
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    capsys.readouterr()
    out = str(tmp_path / "m")
    code = main(["run", "export", "--service-url", live_service.url, "--relay-url", "http://127.0.0.1:1",
                 "--run-id", "run-1", "--tokenizer", str(tokenizer), "--out", out])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "no merged model yet" in err and err.count("\n") == 1, err
    assert not (tmp_path / "m").exists()


def test_only_the_runs_tokenizer_is_shipped(tmp_path: Path) -> None:
    manifest = RunManifest.model_validate(manifest_doc())
    other = tmp_path / "tokenizer.json"
    other.write_text('{"not": "the run\'s"}')
    with pytest.raises(ExportError, match="is not the run's tokenizer"):
        checked_tokenizer(other, manifest)
    with pytest.raises(ExportError, match="cannot read"):
        checked_tokenizer(tmp_path / "missing.json", manifest)
