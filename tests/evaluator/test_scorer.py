"""Per-page held-out losses (``hypertrain.evaluator.scorer``): a checkpoint whose tensors do
not match the architecture is refused before scoring, and two evaluator processes give the
same score bytes for the same model and pages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import save_file

from hypertrain.competition.messages import encode_losses
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError
from hypertrain.evaluator.scorer import load_model, open_dataset
from hypertrain.trainer.export import llama_config
from tests.competition import models
from tests.competition.models import Trained


def _spec(trained: Trained) -> CompetitionSpec:
    return CompetitionSpec.model_validate(models.spec_doc(trained.dataset))


def test_a_missing_tensor_is_refused_before_scoring(trained: Trained, tmp_path: Path) -> None:
    spec = _spec(trained)
    params = dict(trained.weak)
    params.pop("layers.1.mlp.up_proj.weight")
    directory = tmp_path / "partial"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(llama_config(trained.spec)))
    tensors = {f"model.{k}": v.contiguous() for k, v in params.items()}
    save_file(tensors, str(directory / "model.safetensors"))
    with pytest.raises(SubmissionError, match="do not match"):
        load_model(directory, spec)


_SCRIPT = """
import sys
from pathlib import Path
from hypertrain.competition.messages import encode_losses
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.evaluator.scorer import load_model, open_dataset, page_batch, page_losses, prepare
spec = CompetitionSpec.model_validate_json(Path(sys.argv[1]).read_text())
prepare(spec, 1)
ds = open_dataset(spec, Path(sys.argv[2]))
model, _ = load_model(Path(sys.argv[3]), spec)
print(encode_losses(page_losses(model, page_batch(ds, list(range(12))), spec.data.batch_pages)))
"""


def test_two_evaluator_processes_give_identical_score_bytes(
    trained: Trained, tmp_path: Path
) -> None:
    spec = _spec(trained)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(spec.model_dump_json())
    directory = models.export(trained.weak, trained.spec, tmp_path / "model")
    dataset_dir = trained.dataset_dir
    outs = [
        subprocess.run(
            [sys.executable, "-c", _SCRIPT, str(spec_file), str(dataset_dir), str(directory)],
            capture_output=True, text=True, check=True, timeout=300,
        ).stdout.strip()
        for _ in range(2)
    ]  # fmt: skip
    assert outs[0] == outs[1] and len(outs[0]) == 12 * 8
    open_dataset(spec, dataset_dir)  # the dataset matches the spec it was pinned in
    assert encode_losses([1.0]) == "0000803f"
