"""Builders for aggregator tests: a tiny manifest, a start model and synthetic updates."""

from __future__ import annotations

import hashlib
from typing import Any

import torch

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.merge import MergeInputs, max_tokens
from hypertrain.aggregator.tape import Candidate
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.codec import encode_int8
from hypertrain.trainer.model import init_params, param_shapes
from hypertrain.trainer.presets import PRESETS

RUN_ID = "run-1"  # the relay and challenge test harnesses use this run
HOTKEYS = [Hotkey.from_seed(bytes([40 + i]) * 32).ss58_address for i in range(40)]


def manifest(**outer: Any) -> RunManifest:
    return RunManifest.model_validate(
        {
            "run_id": RUN_ID,
            "seed": 11,
            "model": PRESETS["tiny"].model_dump(mode="json"),
            "round": {"inner_steps": 4, "checkpoint_interval": 2},
            "compression": {"block_size": 64},
            "outer": outer,
            "data": {
                "dataset_root": "11" * 32,
                "descriptor_sha256": "22" * 32,
                "tokenizer_sha256": "33" * 32,
                "sample_count": 100,
                "seq_len": 17,
            },
            "determinism": {"torch_version": "2.13.0", "num_threads": 1, "device_class": "cpu"},
        }
    )


SHARED = 0.6  # weight of the direction every honest update shares (pairwise cosine ~0.36)


def delta(m: RunManifest, seed: int, scale: float = 1e-3) -> dict[str, torch.Tensor]:
    """An honest-looking update: a direction common to the round plus its own noise, as
    updates trained from one start model on different samples are (cosine ~0.36)."""
    common = torch.Generator().manual_seed(2**31 - 1)
    own = torch.Generator().manual_seed(seed)
    noise = (1 - SHARED**2) ** 0.5
    return {
        name: (torch.randn(shape, generator=common) * SHARED
               + torch.randn(shape, generator=own) * noise) * scale
        for name, shape in param_shapes(m.model)
    }  # fmt: skip


def put_update(blobs: MemoryBlobs, m: RunManifest, seed: int, scale: float = 1e-3) -> bytes:
    data = encode_int8(delta(m, seed, scale), m.compression.block_size)
    blobs.put(data, kind="update", round=0)
    return data


class World:
    """A manifest, a start model in memory and a growing list of candidates."""

    def __init__(self, **outer: Any) -> None:
        self.manifest = manifest(**outer)
        self.blobs = MemoryBlobs()
        start = init_params(self.manifest.model, self.manifest.seed)
        self.start_sha = self.blobs.put(
            encode_model_blob(start, self.manifest.model), kind="model", round=0
        )
        self.candidates: list[Candidate] = []

    def add(
        self, index: int, seed: int | None = None, *, scale: float = 1e-3,
        tokens: int | None = None, data: bytes | None = None, size: int | None = None,
    ) -> Candidate:  # fmt: skip
        if data is None:
            data = put_update(self.blobs, self.manifest, index if seed is None else seed, scale)
        else:
            self.blobs.put(data, kind="update", round=0)
        cand = Candidate(
            hotkey=HOTKEYS[index],
            update_sha256=hashlib.sha256(data).hexdigest(),
            tokens=max_tokens(self.manifest) if tokens is None else tokens,
            update_bytes=len(data) if size is None else size,
        )
        self.candidates.append(cand)
        return cand

    def inputs(self, round_: int = 0, prev: str | None = None, **kw: Any) -> MergeInputs:
        """Merge inputs; unless told otherwise every candidate counts as audit-proven."""
        kw.setdefault("proven", [c.hotkey for c in self.candidates])
        return MergeInputs(self.manifest, round_, self.start_sha, prev, list(self.candidates), **kw)
