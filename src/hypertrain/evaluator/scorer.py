"""Per-page held-out loss of a submitted model, computed the same way by every evaluator.

The model loads through ``transformers`` with remote code refused, from local
files only, after :func:`hypertrain.competition.checks.check_directory` passed; a
checkpoint whose tensors do not match the architecture exactly (a missing tensor
would be randomly initialised, so two evaluators would disagree) is refused. Pages
are evaluated in the spec's ``data.eval_dtype`` (float32 by default, or bfloat16) with
the eager attention kernel, in fixed batches of ``batch_pages`` (the batch shape and the
dtype change the bits of a matmul), under the process-wide determinism switches; the
loss of a page is the mean next-token cross-entropy over its tokens, computed in
float32 from the logits whatever the model's dtype. The determinism record names the
dtype, so a spec that pins a record pins it too, and evaluators with equal records
produce equal bytes (bfloat16 on CPU included: every CPU torch runs computes it, the
record's ``aten_cpu_capability`` and ``cpu_vendor`` pin which kernels).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from hypertrain.competition.checks import ARCHITECTURES, ModelSummary, check_directory
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.manifest import DeterminismRecord
from hypertrain.trainer.determinism import (
    check_determinism,
    configure_determinism,
    current_record,
)


class EvaluationError(ValueError):
    """The evaluator cannot score here (dataset or determinism mismatch)."""


def prepare(spec: CompetitionSpec, num_threads: int) -> DeterminismRecord:
    """Set the determinism switches; refuse when the spec pins a record this process lacks."""
    configure_determinism(num_threads)  # the switches; the dtype is the evaluation's
    record = current_record(dtype=spec.data.eval_dtype)
    if spec.determinism is not None:
        check_determinism(record, spec.determinism)
    return record


def determinism_sha256(record: DeterminismRecord) -> str:
    return hashlib.sha256(canonical_bytes(record.model_dump(mode="json"))).hexdigest()


def open_dataset(spec: CompetitionSpec, dataset_dir: Path) -> Dataset:
    """The competition's public dataset, checked against the descriptor hash and root the
    spec pins (what miners train on; the scored pages come from the secret pool)."""
    try:
        dataset = Dataset(
            dataset_dir / DESCRIPTOR_NAME, expected_sha256=spec.data.descriptor_sha256
        )
    except (OSError, ValueError) as exc:
        raise EvaluationError(f"dataset in {dataset_dir}: {exc}") from None
    if dataset.tree().root.hex() != spec.data.dataset_root:
        raise EvaluationError("the dataset's Merkle root is not the one the spec pins")
    if dataset.seq_len != spec.data.seq_len:
        raise EvaluationError(f"dataset seq_len {dataset.seq_len} != spec {spec.data.seq_len}")
    return dataset


def page_batch(dataset: Dataset, sample_ids: Sequence[int]) -> torch.Tensor:
    """Samples of a dataset as a ``[B, T]`` int64 tensor."""
    rows = [torch.from_numpy(dataset.sample(int(i)).astype("int64")) for i in sample_ids]
    return torch.stack(rows)


def load_model(directory: Path, spec: CompetitionSpec) -> tuple[Any, ModelSummary]:
    """Check, then load a model directory (in ``data.eval_dtype``, eager attention, no
    remote code)."""
    summary = check_directory(directory, spec.architecture, spec.data.seq_len)
    try:
        import transformers
    except ImportError:
        raise EvaluationError(
            "evaluating needs transformers: pip install 'hypertrain[competition]'"
        ) from None

    cls = getattr(transformers, ARCHITECTURES[spec.architecture.model_type])
    try:
        model, info = cls.from_pretrained(
            str(directory),
            dtype=getattr(torch, spec.data.eval_dtype),
            trust_remote_code=False,
            local_files_only=True,
            attn_implementation="eager",
            output_loading_info=True,
        )
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise SubmissionError(f"the model does not load: {exc}") from None
    problems = {k: v for k, v in info.items() if v and k != "error_msgs"} | (
        {"error_msgs": info["error_msgs"]} if info.get("error_msgs") else {}
    )
    if problems:
        raise SubmissionError(f"the tensors do not match the architecture: {problems}")
    return model.eval(), summary


def page_losses(model: Any, batch: torch.Tensor, batch_pages: int) -> list[float]:
    """Mean next-token cross-entropy of every page in fixed-size batches, computed in
    float32 from the model's logits (whatever dtype the model runs in)."""
    out: list[float] = []
    with torch.no_grad():
        for start in range(0, batch.shape[0], batch_pages):
            chunk = batch[start : start + batch_pages]  # (B, T)
            logits = model(input_ids=chunk[:, :-1]).logits.float()  # (B, T-1, V)
            ce = torch.nn.functional.cross_entropy(
                logits.transpose(1, 2), chunk[:, 1:], reduction="none"
            )  # (B, T-1)
            out.extend(float(v) for v in ce.mean(dim=1))
    return out
