"""A small, real network world for miner/auditor tests: dataset, manifest, signed records."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypertrain.data import PrepareOptions, prepare, train_tokenizer
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.data.tokenizer import tokenizer_from_bytes
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.determinism import current_record
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import get_preset, with_vocab

RUN_ID = "run-t"
SEQ_LEN = 16
COORD = Hotkey.from_seed(b"\x11" * 32)
ISLANDS = [Hotkey.from_seed(bytes([0x20 + i]) * 32) for i in range(3)]


def make_dataset(assets_dir: Path, out: Path, text_bytes: int = 40_000) -> Dataset:
    corpus = out.parent / "corpus.txt"
    corpus.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_bytes((assets_dir / "tinyshakespeare.txt").read_bytes()[:text_bytes])
    tok = tokenizer_from_bytes(train_tokenizer([corpus], 300))
    prepare([corpus], tok, SEQ_LEN, out, PrepareOptions(heldout_fraction=0.05))
    return Dataset(out / DESCRIPTOR_NAME)


def manifest_doc(dataset: Dataset, **round_over: Any) -> dict[str, Any]:
    spec = with_vocab(get_preset("tiny"), dataset.descriptor.vocab_size)
    rnd = {
        "inner_steps": 4,
        "checkpoint_interval": 2,
        "commit_window_rounds": 8,
        "audit_window_rounds": 6,
        "dispute_window_rounds": 1,
        "layout": {"micro_batch_size": 2},
        **round_over,
    }
    return {
        "run_id": RUN_ID,
        "seed": 3,
        "model": spec.model_dump(mode="json"),
        "inner": {"warmup_steps": 2, "total_steps": 100},
        "round": rnd,
        "data": dataset.descriptor.data_spec().model_dump(mode="json"),
        "audit": {
            "rate": 1.0,
            "segments": rnd["inner_steps"] // rnd["checkpoint_interval"],
            "probation_rounds": 0,
        },
        "determinism": _determinism(),
        "coordinator": COORD.ss58_address,
        # a closed network: admitted on the self-reported hash (network tests turn it on)
        "admission": {"challenge": False},
    }


def _determinism() -> dict[str, Any]:
    """What ``configure_determinism(1, "cpu")`` records, without changing this process."""
    record = current_record("cpu").model_dump(mode="json")
    record["num_threads"] = 1
    record["settings"]["deterministic_algorithms"] = "true"
    return record


@dataclass
class World:
    dataset: Dataset
    dataset_dir: Path
    manifest: RunManifest
    model_blob: bytes

    @property
    def model_sha(self) -> str:
        return hashlib.sha256(self.model_blob).hexdigest()

    def manifest_envelope(self, key: Hotkey = COORD) -> Envelope:
        body = {"manifest": self.manifest.model_dump(mode="json")}
        return seal(key, domain="manifest", run_id=RUN_ID, body=body, expiry_round=10**9)

    def round_open(
        self, index: int, roster: list[str], sha: str | None = None, **fields: Any
    ) -> Envelope:
        """The coordinator's round-open record (``fields``: its optional lists, e.g.
        ``carry_stored``)."""
        record = RoundOpen(
            round=index,
            start_model_sha256=sha or self.model_sha,
            start_model_url=f"http://relay/blobs/{sha or self.model_sha}",
            beacon_round=100 + index,
            assignment_key=f"{index + 1:02x}" * 32,
            roster=sorted(roster),
            commit_deadline_round=200,
            **fields,
        )
        return seal(
            COORD,
            domain="round-open",
            run_id=RUN_ID,
            body=record.model_dump(mode="json"),
            expiry_round=10**9,
        )


def make_world(assets_dir: Path, tmp: Path) -> World:
    dataset = make_dataset(assets_dir, tmp / "dataset")
    manifest = RunManifest.model_validate(manifest_doc(dataset))
    blob = encode_model_blob(init_params(manifest.model, manifest.seed), manifest.model)
    return World(dataset, tmp / "dataset", manifest, blob)
