"""``hypertrain run warm-start``: train a run's warm start, or check the round 0 it opened.

The operator runs it before round 0 and gives the file it writes to the aggregator
(``--genesis-model``); anyone holding the run's dataset runs it to check that round 0's
published model is the warm start's (``--expect-sha256``, or ``--service`` with round 0
open). It runs under the manifest's determinism record, as a replay does, so the bytes
are the ones every machine of the run's device class computes.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.genesis import genesis_blob
from hypertrain.evidence.inputs import open_dataset
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.determinism import check_determinism, configure_determinism
from hypertrain.trainer.profile import apply_profile


class GenesisMismatchError(VerificationError):
    """Round 0's published model is not the one the warm start computes."""


@dataclass(frozen=True, slots=True)
class WarmStartResult:
    run_id: str
    steps: int
    samples_per_step: int
    model_sha256: str
    model_bytes: int
    seconds: float
    expected_sha256: str | None  # what it was checked against (None: not checked)

    def as_json(self) -> dict[str, object]:
        return {
            "event": "warm_start",
            "run_id": self.run_id,
            "steps": self.steps,
            "samples_per_step": self.samples_per_step,
            "model_sha256": self.model_sha256,
            "model_bytes": self.model_bytes,
            "seconds": round(self.seconds, 3),
            "matches": None if self.expected_sha256 is None else True,
        }


def warm_start(
    manifest: RunManifest,
    dataset_dir: Path,
    *,
    out: Path | None = None,
    expect_sha256: str | None = None,
    device: str = "cpu",
) -> WarmStartResult:
    """Train ``manifest``'s warm start on the dataset in ``dataset_dir``; write the model
    blob to ``out`` and refuse (:class:`GenesisMismatchError`) a model other than
    ``expect_sha256``."""
    warm = manifest.warm_start
    if warm is None:
        raise VerificationError(
            f"run {manifest.run_id} has no warm start: round 0 starts from its seed's model"
        )
    dataset = open_dataset(dataset_dir, manifest)
    det = manifest.determinism
    apply_profile(det)  # may re-execute this process with the run's CPU switches
    check_determinism(configure_determinism(det.num_threads, device, det.dtype), det)
    started = time.monotonic()
    blob = genesis_blob(manifest, dataset, device=device)
    sha = hashlib.sha256(blob).hexdigest()
    if expect_sha256 is not None and sha != expect_sha256.lower():
        raise GenesisMismatchError(
            f"round 0's model {expect_sha256} is not the warm start's: it computes {sha}"
        )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(blob)
    return WarmStartResult(
        manifest.run_id, warm.steps, warm.samples_per_step, sha, len(blob),
        time.monotonic() - started, expect_sha256,
    )  # fmt: skip
