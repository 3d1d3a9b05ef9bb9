"""``hypertrain run export``: the newest merged model of a run, with its tokenizer, in one step.

Reads the signed manifest from the service (checked against a pinned coordinator when
one is given), takes the newest round that has a merged model, downloads that model
from the relay by its hash, checks the tokenizer against the manifest's
``tokenizer_sha256`` and writes a ``LlamaForCausalLM`` directory that transformers
loads offline (``config.json``, ``model.safetensors``, ``tokenizer.json``,
``tokenizer_config.json``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from hypertrain.api.client import ChallengeClient
from hypertrain.evidence.verify import verify_manifest
from hypertrain.protocol.manifest import RunManifest
from hypertrain.relay.client import RelayClient
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.export import export_llama, export_tokenizer

MAX_MODEL_BYTES = 1 << 36


class ExportError(ValueError):
    """Nothing to export yet, or a tokenizer that is not the run's."""


@dataclass(frozen=True, slots=True)
class Exported:
    run_id: str
    round: int
    model_sha256: str
    out_dir: Path


def newest_model(service: ChallengeClient, run_id: str) -> tuple[int, str]:
    """(round, model hash) of the newest round with a merged model."""
    merged = [(r.round, r.new_model_sha256) for r in service.rounds(run_id) if r.new_model_sha256]
    if not merged:
        raise ExportError(f"run {run_id} has no merged model yet: wait for the first merge")
    index, sha = max(merged)
    assert sha is not None
    return index, sha


def checked_tokenizer(path: Path, manifest: RunManifest) -> Path:
    """``path`` if it is the tokenizer the manifest pins; else :class:`ExportError`."""
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ExportError(f"cannot read the tokenizer {path}: {exc.strerror}") from None
    if digest != manifest.data.tokenizer_sha256:
        raise ExportError(f"{path} is not the run's tokenizer (the manifest pins another hash)")
    return path


def export_run(
    service_url: str, relay_url: str, run_id: str, tokenizer: Path, out_dir: Path,
    coordinator: str | None = None,
) -> Exported:  # fmt: skip
    """Write the run's newest merged model and its tokenizer to ``out_dir``."""
    with ChallengeClient(service_url) as service:
        manifest = verify_manifest(service.manifest_envelope(run_id), run_id, coordinator)
        index, sha = newest_model(service, run_id)
    checked_tokenizer(tokenizer, manifest)
    with RelayClient(relay_url, None, run_id) as relay:
        data = relay.get(sha, max_bytes=MAX_MODEL_BYTES)
    params = decode_model_blob(data, manifest.model, expected_sha256=sha)
    export_llama(params, manifest.model, out_dir)
    export_tokenizer(tokenizer, manifest.model, out_dir)
    return Exported(run_id, index, sha, out_dir)
