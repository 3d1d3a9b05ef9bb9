"""The cost of an automatic rollback k rounds deep, against the cost of one merge.

A chain of ``max(depths) + 1`` rounds of the proxy model is merged (four audit-proven
int8 updates a round, blobs in memory); then, for each depth k, the fault of one island
in round ``last - k`` is rebased out (``aggregator.rebase.rebase``): that round is
recomputed without the update and the k later rounds are replayed onto the corrected
model (its bitwise identity with a chain that never merged the update is tested in
``tests/aggregator/test_rebase.py``; here only the cost is measured). The figure of
merit is the rollback's wall time over the mean wall time of one merge of the same
chain: a rollback k deep is k + 1 merges, recomputed from the tapes and blobs.

    .venv/bin/python benchmarks/bench_rollback.py [--depths 1 3 5] [--preset proxy]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import time

import torch

from common import peak_rss_mb, write_result
from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.merge import MergeInputs, MergeResult, max_tokens, merge
from hypertrain.aggregator.rebase import rebase
from hypertrain.aggregator.screen import proven_history
from hypertrain.aggregator.tape import Candidate
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.codec import encode_int8
from hypertrain.trainer.model import init_params, param_shapes
from hypertrain.trainer.presets import PRESETS

ISLANDS = 4
HOTKEYS = [Hotkey.from_seed(bytes([i + 1]) * 32).ss58_address for i in range(ISLANDS)]


def bench_manifest(preset: str) -> RunManifest:
    seq_len = min(128, PRESETS[preset].context_length)
    return RunManifest.model_validate({
        "run_id": "bench", "seed": 1, "model": PRESETS[preset].model_dump(mode="json"),
        "round": {"inner_steps": 8, "checkpoint_interval": 4},
        "data": {"dataset_root": "11" * 32, "descriptor_sha256": "22" * 32,
                 "tokenizer_sha256": "33" * 32, "sample_count": 1000, "seq_len": seq_len},
        "determinism": {"torch_version": torch.__version__, "num_threads": 1,
                        "device_class": "cpu"},
    })  # fmt: skip


def _updates(m: RunManifest, blobs: MemoryBlobs, index: int) -> list[Candidate]:
    shared = torch.Generator().manual_seed(999 + index)  # the direction a round's updates share
    common = {n: torch.randn(s, generator=shared) for n, s in param_shapes(m.model)}
    out = []
    for i, hotkey in enumerate(HOTKEYS):
        gen = torch.Generator().manual_seed(1000 * index + i)
        delta = {n: (0.6 * common[n] + 0.8 * torch.randn(s, generator=gen)) * 1e-3
                 for n, s in param_shapes(m.model)}  # fmt: skip
        data = encode_int8(delta, m.compression.block_size)
        blobs.put(data, kind="update", round=index)
        out.append(Candidate(hotkey=hotkey, update_sha256=hashlib.sha256(data).hexdigest(),
                             tokens=max_tokens(m) - i, update_bytes=len(data), seq=i))  # fmt: skip
    return out


def merged_chain(
    m: RunManifest, blobs: MemoryBlobs, rounds: int
) -> tuple[list[MergeResult], float]:
    """``rounds`` merges in a row; returns them and the mean seconds of one merge."""
    start = blobs.put(encode_model_blob(init_params(m.model, m.seed), m.model), kind="model",
                      round=0)  # fmt: skip
    outer: str | None = None
    results: list[MergeResult] = []
    spent = 0.0
    for index in range(rounds):
        cands = _updates(m, blobs, index)
        inputs = MergeInputs(
            m, index, start, outer, cands,
            history_norms=proven_history(reversed([r.tape for r in results])),
            proven=[c.hotkey for c in cands],
        )  # fmt: skip
        began = time.perf_counter()
        result = merge(inputs, blobs)
        spent += time.perf_counter() - began
        start = blobs.put(result.model_blob, kind="model", round=index)
        outer = blobs.put(result.outer_blob, kind="outer_state", round=index)
        results.append(result)
    return results, spent / rounds


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--depths", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--preset", default="proxy")
    args = parser.parse_args()
    torch.set_num_threads(1)
    m, blobs = bench_manifest(args.preset), MemoryBlobs()
    chain, one_merge = merged_chain(m, blobs, max(args.depths) + 1)
    values: dict[str, object] = {
        "git_commit": git_commit(), "preset": args.preset, "updates_per_round": ISLANDS,
        "merge_seconds_mean": round(one_merge, 3),
    }  # fmt: skip
    words = []
    for k in sorted(args.depths):
        tapes = [r.tape for r in chain[len(chain) - k - 1 :]]
        began = time.perf_counter()
        fixed = rebase(tapes, {tapes[0].round: {HOTKEYS[1]}}, blobs)
        seconds = time.perf_counter() - began
        assert len(fixed) == k + 1
        assert fixed[-1].result.model_blob != chain[-1].model_blob
        ratio = seconds / one_merge
        values[f"rollback_seconds_depth_{k}"] = round(seconds, 3)
        values[f"rollback_cost_depth_{k}"] = f"{ratio:.1f}× one merge"
        deep = f"{k} round{'s' if k > 1 else ''} deep"
        words.append(f"a rollback {deep} costs {ratio:.1f}× one merge")
    values["peak_rss_mb"] = round(peak_rss_mb(), 1)
    notes = (
        f"In words: {'; '.join(words)} ({args.preset} model, {ISLANDS} updates a round,"
        " one thread, blobs in memory). A rollback k deep recomputes k + 1 merges from"
        " their tapes and blobs, so its cost grows linearly with the depth; the later"
        " rounds' updates are read again, never re-trained. One run: the ratios move by a"
        " few tenths between runs on a shared machine."
    )
    write_result("rollback", values, notes=notes)


if __name__ == "__main__":
    main()
