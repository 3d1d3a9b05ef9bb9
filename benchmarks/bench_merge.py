"""Aggregator merge time and peak memory for M = 2, 8, 32 updates of the proxy model.

The parent writes 32 distinct int8 updates of the proxy model (and the start model)
to a scratch directory once; then each M runs in its own child process, so the peak
RSS of a child (``ru_maxrss``) is that merge's alone. Blobs are read from disk, as the
aggregator reads its relay cache. The updates share a direction (pairwise cosine about
0.36, as trained updates do), so the robust screens keep all of them. Peak memory
grows with M only by the encoded updates the Gram matrix holds (int8, a quarter of
the float model each); decoded, only the start model, the momentum, the accumulator,
one update and one tensor of each update are alive.

    .venv/bin/python benchmarks/bench_merge.py [--counts 2 8 32]

Helper B's ``bench_network.py`` folds ``merge_peak_rss_mb_*`` into network.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from common import peak_rss_mb, write_result
from hypertrain.aggregator.blobs import check_hash
from hypertrain.aggregator.errors import BlobError
from hypertrain.aggregator.merge import MergeInputs, max_tokens, merge
from hypertrain.aggregator.tape import Candidate
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.codec import encode_int8
from hypertrain.trainer.model import init_params, param_shapes
from hypertrain.trainer.presets import PRESETS


class DirBlobs:
    """Blobs as files named by their SHA-256, read (and re-hashed) on every get."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, sha256: str) -> bytes:
        path = self.root / sha256
        if not path.is_file():
            raise BlobError("missing_blob", sha256)
        return check_hash(sha256, path.read_bytes())

    def add(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        (self.root / sha).write_bytes(data)
        return sha


def bench_manifest() -> RunManifest:
    return RunManifest.model_validate({
        "run_id": "bench", "seed": 1, "model": PRESETS["proxy"].model_dump(mode="json"),
        "round": {"inner_steps": 8, "checkpoint_interval": 4},
        "data": {"dataset_root": "11" * 32, "descriptor_sha256": "22" * 32,
                 "tokenizer_sha256": "33" * 32, "sample_count": 1000, "seq_len": 128},
        "determinism": {"torch_version": torch.__version__, "num_threads": 1,
                        "device_class": "cpu"},
    })  # fmt: skip


def prepare(root: Path, count: int) -> dict[str, object]:
    m, blobs = bench_manifest(), DirBlobs(root)
    start = blobs.add(encode_model_blob(init_params(m.model, m.seed), m.model))
    cands = []
    shared = torch.Generator().manual_seed(999)  # the direction honest updates share
    common = {n: torch.randn(s, generator=shared) for n, s in param_shapes(m.model)}
    for i in range(count):
        gen = torch.Generator().manual_seed(1000 + i)
        delta = {n: (0.6 * common[n] + 0.8 * torch.randn(s, generator=gen)) * 1e-3
                 for n, s in param_shapes(m.model)}  # fmt: skip
        data = encode_int8(delta, m.compression.block_size)
        hotkey = Hotkey.from_seed(bytes([i + 1]) * 32).ss58_address
        cands.append({"hotkey": hotkey, "update_sha256": blobs.add(data),
                      "tokens": max_tokens(m) - i, "update_bytes": len(data)})  # fmt: skip
    return {"start": start, "candidates": cands, "update_bytes": len(data)}


def child(root: Path, count: int) -> None:
    plan = json.loads((root / "plan.json").read_text())
    m = bench_manifest()
    cands = [Candidate.model_validate(c) for c in plan["candidates"][:count]]
    # every update counts as audit-proven, so the reference norm is the round's median
    inputs = MergeInputs(m, 0, plan["start"], None, cands, proven=[c.hotkey for c in cands])
    baseline = peak_rss_mb()
    started = time.perf_counter()
    result = merge(inputs, DirBlobs(root))
    seconds = time.perf_counter() - started
    assert len(result.tape.included) == count, result.tape.excluded
    out = {"seconds": seconds, "peak_rss_mb": peak_rss_mb(), "baseline_mb": baseline}
    sys.stdout.write(json.dumps(out) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--counts", type=int, nargs="+", default=[2, 8, 32])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.dir, args.child)
        return
    with tempfile.TemporaryDirectory(prefix="bench-merge-") as tmp:
        root = Path(tmp)
        plan = prepare(root, max(args.counts))
        (root / "plan.json").write_text(json.dumps(plan))
        values: dict[str, float] = {}
        for count in args.counts:
            cmd = [sys.executable, __file__, "--child", str(count), "--dir", str(root)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            values[f"merge_seconds_{count}"] = round(got["seconds"], 3)
            values[f"merge_peak_rss_mb_{count}"] = round(got["peak_rss_mb"], 1)
            values[f"merge_baseline_rss_mb_{count}"] = round(got["baseline_mb"], 1)
        values["update_mb"] = round(int(plan["update_bytes"]) / 2**20, 2)  # type: ignore[call-overload]
    write_result(
        "merge",
        values,
        targets=dict.fromkeys(
            (f"merge_peak_rss_mb_{c}" for c in args.counts),
            "O(model) + M encoded updates (never M decoded updates)",
        ),
        notes="proxy model (4.26M params); each M in its own process; blobs read from disk; "
        "robust merge (exact Gram matrix, geometric median); measured on a shared, loaded "
        "2-core machine",
    )


if __name__ == "__main__":
    main()
