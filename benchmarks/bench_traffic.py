"""Honest traffic per island-round against data-parallel training, from the byte formats.

Every figure is an exact byte count of the protocol's own encodings (a real update of the
model's shapes through ``trainer.update.encode_update``, ``trainer.checkpoint.
checkpoint_size``, the float32 model blob), not a timing, so it does not depend on the
machine. Per island and round it counts the update, the commit envelope (about 1 KB),
the audited checkpoints (audit rate x selected segments x one full training state) and
the start-model download, and compares them with a bf16 ring all-reduce every step on as
many devices as islands: ``2(n-1)/n x 2 bytes x params`` per device per step
(``protocol.traffic``).

Scenarios: the devnet as it runs (proxy, H = 12, J = 4, three islands, every island
audited on 2 + 1 segments, int8); the 50m model at H = 500 with 8 islands, the default
audit rate 0.1 on 3 segments, int8 and sparse; and the same with checkpoint uploads
counted as before they became on-demand (all H/J + 1 every round).

Run: ``python benchmarks/bench_traffic.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from common import write_result
from hypertrain.protocol.manifest import CompressionSpec, InnerOptimSpec, ModelSpec, SparseSpec
from hypertrain.protocol.traffic import ddp_bytes_per_device
from hypertrain.trainer.checkpoint import checkpoint_size
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.presets import PRESETS, param_count, with_vocab
from hypertrain.trainer.state import StateConfig
from hypertrain.trainer.update import encode_update

COMMIT_BYTES = 1100  # a signed commit envelope (canonical JSON), as the service stores it
SPARSE = CompressionSpec(error_feedback=True, sparse=SparseSpec())  # 64 of 4096, 2 bits


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    model: ModelSpec
    islands: int
    inner_steps: int  # H
    checkpoint_interval: int  # J
    audit_rate: float
    audited_checkpoints: int  # start checkpoints uploaded when an island is audited
    compression: CompressionSpec


def update_bytes(model: ModelSpec, compression: CompressionSpec) -> int:
    g = torch.Generator().manual_seed(0)
    delta = {n: torch.randn(s, generator=g) * 1e-3 for n, s in param_shapes(model)}
    return len(encode_update(delta, compression))


def per_island_round(s: Scenario) -> dict[str, Any]:
    params = param_count(s.model)
    ckpt = checkpoint_size(StateConfig(s.model, InnerOptimSpec(), s.compression.error_feedback))
    moved = {
        "commit": COMMIT_BYTES,
        "update": update_bytes(s.model, s.compression),
        "checkpoints": round(s.audit_rate * s.audited_checkpoints * ckpt),
        "model_download": 4 * params,
    }
    ddp = ddp_bytes_per_device(params, s.islands, s.inner_steps)
    total = sum(moved.values())
    return {
        "params": params,
        "checkpoint_bytes": ckpt,
        **{f"{k}_bytes": v for k, v in moved.items()},
        "total_bytes": total,
        "ddp_bytes": ddp,
        "ratio_updates_only": ddp / moved["update"],
        "ratio_honest": ddp / total,
    }


def scenarios() -> list[Scenario]:
    proxy = with_vocab(PRESETS["proxy"], 1024)
    big = PRESETS["50m"]
    int8 = CompressionSpec()
    return [
        Scenario("devnet", proxy, 3, 12, 4, 1.0, 3, int8),
        Scenario("devnet_all_checkpoints", proxy, 3, 12, 4, 1.0, 4, int8),
        Scenario("50m_h500_int8", big, 8, 500, 50, 0.1, 3, int8),
        Scenario("50m_h500_int8_all_checkpoints", big, 8, 500, 50, 1.0, 11, int8),
        Scenario("50m_h500_sparse", big, 8, 500, 50, 0.1, 3, SPARSE),
        Scenario("50m_h500_sparse_no_audit_uploads", big, 8, 500, 50, 0.0, 0, SPARSE),
    ]


def main() -> None:
    result: dict[str, Any] = {}
    for s in scenarios():
        row = per_island_round(s)
        for key in ("total_bytes", "update_bytes", "ddp_bytes", "ratio_updates_only"):
            result[f"{s.name}_{key}"] = row[key]
        result[f"{s.name}_ratio_honest"] = row["ratio_honest"]
        print(s.name, {k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()})
    write_result(
        "traffic",
        result,
        targets={"50m_h500_sparse_ratio_honest": ">= 10000x fewer bytes than data-parallel"},
        notes=(
            "Bytes per island per round, exact from the encodings; ratio = data-parallel bytes"
            " per device / island bytes, where data-parallel sends 2(n-1)/n x 2 B x params"
            " per device per step (bf16 ring all-reduce, n = islands), H steps a round."
            " Honest = update + commit + audit rate x selected start checkpoints x one"
            " training state + float32 model download; updates_only = the update alone."
            " *_all_checkpoints uploads every checkpoint every round (before on-demand"
            " uploads). The devnet audits every island every round (rate 1), so its checkpoint"
            " uploads outweigh what data-parallel would send."
        ),
    )


if __name__ == "__main__":
    main()
