"""Round 0's start model, from public inputs: the seed's initial parameters, or the
parameters the manifest's warm start ends with.

* :func:`warm_start_batches`: each warm-start step's samples (``data.warm_start_ids``),
  every one checked against the dataset root.
* :func:`genesis_blob`: the start model's blob (``trainer.blob``). Without a warm start
  it needs no data; with one it trains the warm start (``trainer.warm_start``), so the
  operator publishing round 0 and anyone checking it compute the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator

from hypertrain.data import DataError, Dataset, warm_start_ids
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.inputs import load_samples
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.model import init_params
from hypertrain.trainer.segment import Sample
from hypertrain.trainer.warm_start import run_warm_start


def warm_start_batches(manifest: RunManifest, dataset: Dataset) -> Iterator[list[Sample]]:
    """The verified samples of each warm-start step, in order."""
    warm = manifest.warm_start
    if warm is None:
        raise VerificationError(f"run {manifest.run_id} has no warm start")
    try:
        steps = warm_start_ids(
            manifest.run_id, manifest.seed, dataset.split(), warm.steps, warm.samples_per_step
        )
    except DataError as exc:
        raise VerificationError(f"warm start: {exc}") from exc
    for ids in steps:
        yield load_samples(dataset, [int(i) for i in ids])


def genesis_blob(
    manifest: RunManifest, dataset: Dataset | None = None, *, device: str = "cpu"
) -> bytes:
    """Round 0's start model (``dataset``: needed, and only used, for a warm start)."""
    if manifest.warm_start is None:
        return encode_model_blob(init_params(manifest.model, manifest.seed), manifest.model)
    if dataset is None:
        raise VerificationError(
            f"run {manifest.run_id} starts from a {manifest.warm_start.steps}-step warm start:"
            " its start model needs the run's dataset"
        )
    state = run_warm_start(manifest, warm_start_batches(manifest, dataset), device=device)
    return encode_model_blob(state.params(), manifest.model)
