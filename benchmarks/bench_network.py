"""Network benchmark: assembles benchmarks/results/network.json.

* relay figures: read from results/relay.json (benchmarks/bench_relay.py);
* merge peak RSS for M = 2, 8, 32: read from results/merge.json (benchmarks/bench_merge.py,
  run first when the file is missing and the script exists);
* audit_to_train_ratio: measured here. The miner's cost for one segment is J training
  steps (one ``run_segment`` call per step, as the miner runs them for its progress bar)
  plus writing the checkpoint; the auditor's cost for the same segment is reading the
  checkpoint and index bytes, checking the Merkle proof and the checkpoint hash,
  verifying the samples against the dataset root, replaying J steps and comparing.

Run: ``.venv/bin/python benchmarks/bench_network.py`` (add ``--quick`` for a smoke run).
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS_DIR, write_result

from hypertrain.auditor.replay import IslandRound, load_verified_checkpoint
from hypertrain.data import PrepareOptions, prepare, train_tokenizer
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.data.tokenizer import tokenizer_from_bytes
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.evidence.inputs import load_samples
from hypertrain.miner.island import train_round
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import Commit
from hypertrain.trainer.determinism import configure_determinism
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import get_preset, with_vocab
from hypertrain.trainer.segment import TrainConfig, run_segment
from hypertrain.trainer.state import init_state
from hypertrain.trainer.update import next_round_state

ROOT = Path(__file__).resolve().parents[1]
SEQ_LEN = 32


def _dataset(tmp: Path) -> Dataset:
    corpus = tmp / "corpus.txt"
    corpus.write_bytes((ROOT / "tests/assets/tinyshakespeare.txt").read_bytes()[:300_000])
    tok = tokenizer_from_bytes(train_tokenizer([corpus], 1024))
    prepare([corpus], tok, SEQ_LEN, tmp / "ds", PrepareOptions(heldout_fraction=0.01))
    return Dataset(tmp / "ds" / DESCRIPTOR_NAME)


def _manifest(ds: Dataset, preset: str, j: int) -> RunManifest:
    det = configure_determinism(1, "cpu")
    return RunManifest.model_validate(
        {
            "run_id": "bench",
            "seed": 1,
            "model": with_vocab(get_preset(preset), ds.descriptor.vocab_size).model_dump(
                mode="json"
            ),
            "round": {
                "inner_steps": 2 * j,
                "checkpoint_interval": j,
                "layout": {"micro_batch_size": 4},
            },
            "data": ds.descriptor.data_spec().model_dump(mode="json"),
            "determinism": det.model_dump(mode="json"),
        }
    )


def audit_ratio(preset: str, j: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        ds = _dataset(tmp)
        manifest = _manifest(ds, preset, j)
        config = TrainConfig.from_manifest(manifest)
        ids = list(range(2 * j * config.samples_per_step))
        samples = load_samples(ds, ids)
        params = init_params(manifest.model, manifest.seed)
        start = next_round_state(init_state(config.state_config(), manifest.seed), params, None)
        run_segment(start, config, samples[: config.samples_per_step], 1)  # warm-up
        t0 = time.perf_counter()
        result = train_round(start, config, samples, tmp / "work")
        train_s = (time.perf_counter() - t0) / 2  # two segments
        blobs = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in result.checkpoint_paths}
        index = CheckpointIndex(0, tuple(x.hex() for x in result.leaves), tuple(blobs))
        commit = Commit(
            round=0,
            checkpoint_root=result.root.hex(),
            leaf_count=3,
            update_sha256="0" * 64,
            update_bytes=1,
            tokens=0,
            update_url="",
        )
        t1 = time.perf_counter()
        island = IslandRound(manifest, commit, index, [], params)
        state = load_verified_checkpoint(island, 1, lambda sha: blobs[sha].read_bytes(), config)
        seg = load_samples(ds, ids[j * config.samples_per_step :])
        end = run_segment(state, config, seg, j)
        assert end.state_hash() == index.verified_leaf(2, commit.checkpoint_root)
        audit_s = time.perf_counter() - t1
    return {
        "audit_segment_s": round(audit_s, 3),
        "train_segment_s": round(train_s, 3),
        "audit_to_train_ratio": round(audit_s / train_s, 3),
        "audit_preset": preset,
        "audit_j": j,
    }


def _load(name: str, script: str) -> dict[str, Any]:
    path = RESULTS_DIR / f"{name}.json"
    if not path.exists() and (ROOT / "benchmarks" / script).exists():
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / script)], check=False)
    return dict(json.loads(path.read_text())) if path.exists() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny preset, J=2")
    args = parser.parse_args()
    audit = audit_ratio("tiny", 2) if args.quick else audit_ratio("proxy", 4)
    relay, merge = _load("relay", "bench_relay.py"), _load("merge", "bench_merge.py")
    values: dict[str, Any] = {
        "relay_upload_to_copy_ratio": relay.get("relay_upload_to_copy_ratio"),
        "relay_download_to_copy_ratio": relay.get("relay_download_to_copy_ratio"),
        "merge_peak_rss_mb_2": merge.get("merge_peak_rss_mb_2"),
        "merge_peak_rss_mb_8": merge.get("merge_peak_rss_mb_8"),
        "merge_peak_rss_mb_32": merge.get("merge_peak_rss_mb_32"),
        **audit,
    }
    write_result(
        "network",
        values,
        targets={
            "merge_peak_rss_mb_32": "about merge_peak_rss_mb_2 (flat in M)",
            "audit_to_train_ratio": "about 1 (a replay costs one segment of training)",
        },
        notes=(
            "Relay figures from relay.json and merge figures from merge.json (their own "
            "scripts). Audit: one segment of the proxy model (J=4, 4 samples of 32 tokens "
            "per step) on CPU; the auditor's checkpoint fetch is a local file read, relay "
            "transfer cost is in the relay ratios. Shared 2-core machine, noisy."
        ),
    )


if __name__ == "__main__":
    main()
