"""Benchmark the cost of auditing an island's round against the cost of training it.

One island trains a round of the ``proxy`` preset (``H`` steps, a checkpoint every
``J``) exactly as a miner does: derive the ``reset`` start state, train with a
checkpoint written and hashed every ``J`` steps, encode the int8 update. An auditor
then judges it with the default audit settings (``audit.segments`` = 3 random
non-final segments plus the final one): parse the index, derive and hash the full
start state for leaf 0, decode the assigned checkpoints, replay those segments, hash,
and re-encode the update. Both sides are measured in process CPU seconds on one
pinned thread, in the same run, so the ratio does not depend on machine load.

The expected audit cost per island-round is that ratio times the audit rate
(``audit.rate``, 0.1 by default) after probation, and the ratio itself during
probation (every round audited). Fetching blobs from the relay is not included.

Run: ``python benchmarks/bench_audit.py [--steps H] [--interval J]``.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path

import torch

from common import write_result
from hypertrain.auditor.replay import IslandRound, audit_island
from hypertrain.challenge.rounds.selection import pick_segments
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.start import derive_start_state
from hypertrain.miner.island import train_round
from hypertrain.protocol.manifest import AuditSpec, RunManifest
from hypertrain.protocol.messages import Commit
from hypertrain.trainer.determinism import configure_determinism, current_record
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.update import build_update

SEQ_LEN, BATCH = 129, 4


def _manifest(steps: int, interval: int) -> RunManifest:
    return RunManifest.model_validate(
        {
            "run_id": "bench-audit",
            "seed": 1,
            "model": PRESETS["proxy"].model_dump(mode="json"),
            "inner": {"warmup_steps": 2, "total_steps": 1000},
            "round": {
                "inner_steps": steps,
                "checkpoint_interval": interval,
                "layout": {"micro_batch_size": BATCH},
            },
            "data": {
                "dataset_root": "11" * 32,
                "descriptor_sha256": "22" * 32,
                "tokenizer_sha256": "33" * 32,
                "sample_count": steps * BATCH,
                "seq_len": SEQ_LEN,
            },
            "determinism": current_record("cpu").model_dump(mode="json"),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60, help="H, inner steps per round")
    parser.add_argument("--interval", type=int, default=6, help="J, steps per segment")
    args = parser.parse_args()
    configure_determinism(1, "cpu")
    manifest = _manifest(args.steps, args.interval)
    config = TrainConfig.from_manifest(manifest)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(
        0, manifest.model.vocab_size, (args.steps * BATCH, SEQ_LEN), generator=gen
    )
    samples = [(i, row) for i, row in enumerate(tokens)]
    params = init_params(manifest.model, manifest.seed)

    def fetch_none(sha: str, limit: int) -> bytes:
        raise AssertionError("reset needs no blobs")

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.process_time()
        start = derive_start_state(manifest, config, 0, params, None, fetch_none)
        result = train_round(start, config, samples, Path(tmp))
        update = build_update(params, result.final, manifest.compression)
        train_cpu = time.process_time() - t0
        store = {
            hashlib.sha256(p.read_bytes()).hexdigest(): p.read_bytes()
            for p in result.checkpoint_paths
        }
    index = CheckpointIndex(0, tuple(x.hex() for x in result.leaves), tuple(store))
    commit = Commit(
        round=0,
        checkpoint_root=result.root.hex(),
        leaf_count=len(result.leaves),
        update_sha256=hashlib.sha256(update.data).hexdigest(),
        update_bytes=len(update.data),
        tokens=result.tokens,
        update_url="u",
    )
    audit = AuditSpec()
    segments = pick_segments(b"\x07" * 32, "island", manifest.round.num_segments, audit.segments)
    index_bytes = index.to_bytes()
    t0 = time.process_time()
    parsed = CheckpointIndex.from_bytes(index_bytes, leaf_count=commit.leaf_count)
    start_state = derive_start_state(manifest, config, 0, params, None, fetch_none)
    island = IslandRound(manifest, commit, parsed, samples, params, None, start_state)
    outcome = audit_island(island, segments, store.__getitem__)
    audit_cpu = time.process_time() - t0
    assert outcome.result == "match", outcome.detail
    ratio = audit_cpu / train_cpu
    write_result(
        "audit",
        {
            "inner_steps_H": args.steps,
            "checkpoint_interval_J": args.interval,
            "segments_replayed": len(segments),
            "train_cpu_s_per_island_round": round(train_cpu, 3),
            "audit_cpu_s_per_audited_island_round": round(audit_cpu, 3),
            "audit_to_train_ratio_when_audited": round(ratio, 4),
            "audit_rate": audit.rate,
            "expected_audit_to_train_ratio_per_island_round": round(ratio * audit.rate, 4),
            "replayed_fraction_of_steps": round(len(segments) / manifest.round.num_segments, 4),
        },
        notes=(
            "CPU seconds of one pinned thread (process time), proxy preset, batch 4 x 129 "
            "tokens, default audit settings (3 random non-final segments + the final one, "
            "rate 0.1, every round during probation). The audit also derives and hashes "
            "the full start state for leaf 0 and re-encodes the update. Relay downloads "
            "are not included. No target was set; a replay-only audit would cost "
            "segments_replayed / (H/J) of training."
        ),
    )


if __name__ == "__main__":
    main()
