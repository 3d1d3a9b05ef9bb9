"""``hypertrain run warm-start``: train a run's warm start, or check the round 0 it opened.

The operator runs it before round 0 and gives the file it writes to the aggregator
(``--genesis-model``); anyone holding the run's dataset runs it to check that round 0's
published model is the warm start's (``--expect-sha256``, or ``--service-url``: the start
model the coordinator signed in round 0's round-open record). It runs under the
manifest's determinism record, as a replay does, so the bytes are the ones every machine
of the run's device class computes. It fails closed: a run it can neither write nor
check (round 0 not open, no ``--out``) is an error, not a pass.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from hypertrain.api.client import ChallengeClient
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.genesis import genesis_blob
from hypertrain.evidence.inputs import open_dataset
from hypertrain.evidence.verify import verify_manifest, verify_round_open
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.manifest_file import manifest_document
from hypertrain.trainer.determinism import check_determinism, configure_determinism
from hypertrain.trainer.profile import apply_profile


class GenesisMismatchError(VerificationError):
    """Round 0's published model is not the one the warm start computes."""


_SHA256 = re.compile(r"[0-9a-f]{64}")


def warm_start_inputs(
    *,
    manifest_file: Path | None,
    service_url: str | None,
    run_id: str | None,
    coordinator: str | None,
    expect_sha256: str | None,
    writes: bool,
) -> tuple[RunManifest, str | None]:
    """The manifest (a file, or the service's, signature checked) and the model hash to
    check against (``expect_sha256``, else round 0's signed start model via the service);
    a call that would neither write the model (``writes``) nor check one is refused."""
    if expect_sha256 is not None and not _SHA256.fullmatch(expect_sha256):
        raise ValueError(f"--expect-sha256 must be 64 lowercase hex digits, got {expect_sha256!r}")
    if manifest_file is not None:
        if run_id or coordinator:
            raise ValueError("--run-id and --coordinator go with --service-url, not --manifest")
        manifest, expect = read_manifest(manifest_file), expect_sha256
    else:
        if not service_url or not run_id:
            raise ValueError("--service-url needs --run-id")
        service = ChallengeClient(service_url)
        manifest = verify_manifest(service.manifest_envelope(run_id), run_id, coordinator)
        expect = expect_sha256 or published_start_model(service, manifest)
    if expect is None and not writes:
        why = "round 0 is not open yet" if manifest_file is None else "no model is named"
        raise VerificationError(
            f"nothing to check and nothing to write ({why}): give --out FILE to train"
            " round 0's model, or --expect-sha256 HEX to check one"
        )
    return manifest, expect


def read_manifest(path: Path) -> RunManifest:
    """A manifest file (``run init``'s, comments allowed, or a signed envelope)."""
    try:
        return RunManifest.model_validate(manifest_document(path.read_bytes()))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "manifest"
        raise VerificationError(f"{path}: {where}: {first['msg']}") from None


def published_start_model(service: ChallengeClient, manifest: RunManifest) -> str | None:
    """Round 0's start model as the coordinator signed it in the round-open record, or
    None while the run has no round."""
    if not service.rounds(manifest.run_id):
        return None
    detail = service.round_detail(manifest.run_id, 0)
    return verify_round_open(detail.open, manifest, 0).start_model_sha256


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
    if expect_sha256 is not None and sha != expect_sha256:
        raise GenesisMismatchError(
            f"the model checked, {expect_sha256}, is not the warm start's: it computes {sha}"
        )
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(blob)
    return WarmStartResult(
        manifest.run_id, warm.steps, warm.samples_per_step, sha, len(blob),
        time.monotonic() - started, expect_sha256,
    )  # fmt: skip
