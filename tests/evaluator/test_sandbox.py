"""Scoring in a limited child process (``hypertrain.evaluator.sandbox``).

A child that runs past its time limit or allocates past its memory limit, and a model
whose loading raises inside ``transformers`` (an error no check foresaw), are each that
model's refusal, and the next model is still scored.

bfloat16 evaluation: a spec field (float32 by default, out of the hash at the default),
recorded in the determinism record, and deterministic on one machine. Scores come from
the child (``score_model``), as in production, for a random tiny Llama on random pages.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
import torch
from pydantic import ValidationError

from hypertrain.competition.messages import encode_losses
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError
from hypertrain.evaluator.sandbox import Limits, run_limited, score_model
from hypertrain.evaluator.scorer import load_model, page_batch, prepare
from tests.competition import models
from tests.competition.models import Trained, tiny_llama
from tests.competition.world import spec_doc

THREADS = 1
LIMITS = Limits(time_s=120.0, memory_bytes=4 << 30)


def spec_with(eval_dtype: str | None, **over: Any) -> CompetitionSpec:
    doc = spec_doc(**over)
    if eval_dtype is not None:
        doc["data"] = {**doc["data"], "eval_dtype": eval_dtype}
    return CompetitionSpec.model_validate(doc)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("eval-dtype") / "model"
    tiny_llama(out)
    return out


@pytest.fixture(scope="module")
def pages() -> npt.NDArray[np.int64]:
    return np.random.default_rng(11).integers(0, 300, size=(8, 16)).astype(np.int64)


def test_float32_is_the_default_and_stays_out_of_the_hash() -> None:
    default, explicit = spec_with(None), spec_with("float32")
    assert default.data.eval_dtype == "float32"
    assert default.digest() == explicit.digest()
    assert b"eval_dtype" not in default.canonical()
    bf16 = spec_with("bfloat16")
    assert b'"eval_dtype":"bfloat16"' in bf16.canonical() and bf16.digest() != default.digest()


def test_the_determinism_record_names_the_evaluation_dtype() -> None:
    record = prepare(spec_with("bfloat16"), THREADS)
    assert record.dtype == "bfloat16"
    assert prepare(spec_with(None), THREADS).dtype == "float32"
    pinned = spec_with("bfloat16", determinism=record.model_dump(mode="json"))
    assert prepare(pinned, THREADS) == record  # a spec pinning the record is met here
    with pytest.raises(ValidationError, match=r"determinism\.dtype 'bfloat16' is not"):
        spec_with(None, determinism=record.model_dump(mode="json"))


def test_bfloat16_scores_are_identical_bytes_twice_and_not_the_float32_ones(
    model_dir: Path, pages: npt.NDArray[np.int64]
) -> None:
    spec = spec_with("bfloat16")
    first = score_model(model_dir, spec, pages, THREADS, LIMITS)
    second = score_model(model_dir, spec, pages, THREADS, LIMITS)
    assert encode_losses(first) == encode_losses(second)
    f32 = score_model(model_dir, spec_with(None), pages, THREADS, LIMITS)
    assert encode_losses(first) != encode_losses(f32)  # the dtype did apply
    assert np.allclose(first, f32, rtol=0.02)


def test_the_float32_default_is_a_plain_float32_forward(
    model_dir: Path, pages: npt.NDArray[np.int64]
) -> None:
    """The default's bytes are those of the model run in float32 by transformers itself."""
    import transformers

    got = score_model(model_dir, spec_with(None), pages, THREADS, LIMITS)
    prepare(spec_with(None), THREADS)  # the child's switches, here
    model = transformers.LlamaForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32, attn_implementation="eager", local_files_only=True
    ).eval()
    batch = torch.from_numpy(pages)  # (8, 16); one batch of batch_pages = 8
    with torch.no_grad():
        logits = model(input_ids=batch[:, :-1]).logits  # (8, 15, 300)
        ce = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), batch[:, 1:], reduction="none"
        )  # (8, 15)
    assert encode_losses(got) == encode_losses([float(v) for v in ce.mean(dim=1)])


def test_the_limited_child_is_stopped_at_its_time_limit() -> None:
    with pytest.raises(SubmissionError, match="longer than"):
        run_limited(["-c", "import time; time.sleep(600)"], Limits(time_s=0.5))


def test_the_limited_child_cannot_allocate_past_its_memory_limit() -> None:
    with pytest.raises(SubmissionError, match="MemoryError"):
        run_limited(["-c", "x = bytearray(4 << 30)"], Limits(memory_bytes=1 << 30))


def test_a_crash_while_loading_is_a_refusal_and_the_next_model_is_scored(
    trained: Trained, tmp_path: Path
) -> None:
    spec = CompetitionSpec.model_validate(models.spec_doc(trained.dataset))
    hostile = models.export(trained.weak, trained.spec, tmp_path / "hostile")
    config = json.loads((hostile / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": "x"}
    (hostile / "config.json").write_text(json.dumps(config))
    with pytest.raises(TypeError):  # in process, this escapes every check
        model, _ = load_model(hostile, spec)
        model(input_ids=torch.zeros(1, 4, dtype=torch.long))
    pages = page_batch(trained.dataset, [0, 1, 2, 3]).numpy().astype(np.int64)
    with pytest.raises(SubmissionError, match="TypeError"):
        score_model(hostile, spec, pages, 1, Limits(time_s=300))
    honest = models.export(trained.weak, trained.spec, tmp_path / "honest")
    losses = score_model(honest, spec, pages, 1, Limits(time_s=300))
    assert len(losses) == 4 and all(math.isfinite(v) and v > 0 for v in losses)
