"""Known-answer vectors for the project's own byte formats: recipes and the pinned runner.

Each recipe builds a fixed, tiny input from exact values (small integers scaled by powers
of two, so every float is exact) and returns what the format makes of it: hashes, roots,
permutations, selections. The answers are frozen under ``tests/assets/vectors/`` and
``tests/test_known_answers.py`` recomputes them; ``scripts/freeze_vectors.py`` rewrites
them when a format change is intended (docs/development.md, docs/protocol.md changelog).

Training and merging run float kernels whose last bits can depend on the instruction set
torch dispatches to. So all recipes run in one child process with a pinned profile
(``PROFILE``: ATen's portable ``default`` kernels, MKL's ``COMPATIBLE`` code path, oneDNN
held to SSE4.1, one thread), and the answers hold on any x86-64 machine, whatever the
parent's environment. Measured: without the pins, the segment's leaves differ between
``ATEN_CPU_CAPABILITY=default`` and ``avx2``, and between ``MKL_CBWR`` unset, ``AVX2``
and ``COMPATIBLE``; every other vector is the same under all of them.

Run as ``python -m tests.known_answers`` to print every answer as JSON (pinned).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VECTORS_DIR = ROOT / "tests" / "assets" / "vectors"
PROFILE = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "OMP_NUM_THREADS": "1",
}
Answer = dict[str, Any]


def _exact(shape: tuple[int, ...], salt: int) -> Any:
    """A float32 tensor of exact values in [-1, 1): small integers divided by 128."""
    import torch

    n = 1
    for d in shape:
        n *= d
    ints = (torch.arange(n, dtype=torch.int64) * 37 + salt * 11) % 255 - 127
    return (ints.to(torch.float32) / 128).reshape(shape)


def _tiny_config() -> Any:
    from hypertrain.protocol.manifest import InnerOptimSpec, LayoutSpec
    from hypertrain.trainer.presets import PRESETS
    from hypertrain.trainer.segment import TrainConfig

    return TrainConfig(
        model=PRESETS["tiny"],
        inner=InnerOptimSpec(warmup_steps=2, total_steps=20),
        layout=LayoutSpec(dp_ranks=2, micro_batches=1, micro_batch_size=2),
        seq_len=17,
        inner_steps=4,
        checkpoint_interval=2,
    )


def _fixed_state() -> Any:
    from hypertrain.trainer.state import TrainState

    config = _tiny_config().state_config()
    tensors = {s.name: _exact(s.shape, i) for i, s in enumerate(config.layout())}
    return TrainState(3, tensors, config.digest())


def state_hash() -> Answer:
    state = _fixed_state()
    return {"config_digest": state.config_digest.hex(), "state_hash": state.state_hash().hex()}


def checkpoint() -> Answer:
    from hypertrain.trainer.checkpoint import encode_checkpoint

    data = encode_checkpoint(_fixed_state())
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def carried_state() -> Answer:
    """What the fixed state carries into the next round (``HTCARRY1``: no parameters), and
    a checkpoint index naming it."""
    from hypertrain.evidence.index import CheckpointIndex
    from hypertrain.protocol.manifest import CompressionSpec
    from hypertrain.trainer.carried import encode_carried
    from hypertrain.trainer.start_state import carried_of

    state = _fixed_state()
    data = encode_carried(carried_of(state, state.params(), CompressionSpec()))
    sha = hashlib.sha256(data).hexdigest()
    index = CheckpointIndex(0, (state.state_hash().hex(),), (sha,), sha).to_bytes()
    return {"bytes": len(data), "sha256": sha, "index_sha256": hashlib.sha256(index).hexdigest()}


def carried_state_bf16() -> Answer:
    """The fixed state with its optimizer slots divided by 3 (so bfloat16 rounds them),
    carried with the slots in bfloat16 (``inner.carried_dtype``), and the start state it
    gives with the fixed parameters."""
    import torch

    from hypertrain.protocol.manifest import CompressionSpec
    from hypertrain.trainer.carried import encode_carried
    from hypertrain.trainer.start_state import carried_of, carry_state
    from hypertrain.trainer.state import StateConfig, TrainState

    fixed = _fixed_state()
    tensors = {k: v / 3 if k.startswith("optim.") else v for k, v in fixed.tensors.items()}
    state = TrainState(fixed.step, tensors, fixed.config_digest)
    carried = carried_of(state, state.params(), CompressionSpec(), slots=torch.bfloat16)
    data = encode_carried(carried)
    tiny = _tiny_config()
    inner = tiny.inner.model_copy(update={"state_policy": "carry", "carried_dtype": "bfloat16"})
    start = carry_state(carried, state.params(), StateConfig(tiny.model, inner))
    return {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "start_state_hash": start.state_hash().hex(),
    }


def _quantized_update(bits: int, entropy: bool = False) -> Answer:
    from hypertrain.trainer.codec import encode_quantized, update_hash

    params = _fixed_state().params()
    delta = {k: _exact(tuple(v.shape), 7 + i) / 64 for i, (k, v) in enumerate(params.items())}
    data = encode_quantized(delta, 64, bits, entropy)
    return {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "update_hash": update_hash(data).hex(),
    }


def int8_update() -> Answer:
    return _quantized_update(8)


def int4_update() -> Answer:
    """The same delta in the 4-bit format (``HTQ4``)."""
    return _quantized_update(4)


def int2_update() -> Answer:
    """The same delta in the 2-bit format (``HTQ2``)."""
    return _quantized_update(2)


def int4_entropy_update() -> Answer:
    """The same delta's 4-bit codes entropy coded (``HTE4``)."""
    return _quantized_update(4, entropy=True)


def int2_entropy_update() -> Answer:
    """The same delta's 2-bit codes entropy coded (``HTE2``)."""
    return _quantized_update(2, entropy=True)


def _samples(count: int) -> list[tuple[int, Any]]:
    import numpy as np

    return [(i, ((np.arange(17) * 5 + i * 3) % 64).astype(np.uint16)) for i in range(count)]


def segment() -> Answer:
    from hypertrain.trainer.segment import run_round

    config = _tiny_config()
    start = _fixed_state()
    start = type(start)(0, start.tensors, start.config_digest)
    result = run_round(start, config, _samples(4 * config.samples_per_step))
    return {"leaves": [leaf.hex() for leaf in result.leaves], "root": result.root.hex()}


def envelope() -> Answer:
    from hypertrain.protocol.envelope import signing_bytes
    from hypertrain.protocol.identity import Hotkey

    key = Hotkey.from_seed(bytes(range(32)))
    unsigned = {
        "version": 1,
        "domain": "commit",
        "run_id": "run-v",
        "signer": key.ss58_address,
        "nonce": "nonce-0001",
        "expiry_round": 1234,
        "body": {"round": 3, "tokens": 4096, "root": "ab" * 32, "loss": 4.25, "note": "é"},
    }
    data = signing_bytes(unsigned)
    return {"signer": key.ss58_address, "signing_bytes_hex": data.hex()}


def permutation() -> Answer:
    from hypertrain.data.permutation import Permutation

    perm = Permutation(bytes(range(32)), 1000)
    full = perm.range(0, 1000)
    return {
        "first_32": [int(x) for x in full[:32]],
        "sha256_u64le": hashlib.sha256(full.astype("<u8").tobytes()).hexdigest(),
    }


def audit_selection() -> Answer:
    from hypertrain.challenge.rounds.selection import assignment_key, select_audits, selection_seed
    from hypertrain.protocol.identity import Hotkey

    hotkeys = [Hotkey.from_seed(bytes([0x30 + i]) * 32).ss58_address for i in range(6)]
    args = {"run_id": "run-v", "round_index": 3, "beacon_round": 1234, "randomness_hex": "cd" * 32}
    audits = select_audits(
        **args,
        committed={h: i == 5 for i, h in enumerate(hotkeys)},
        rate=0.5,
        segments_per_audit=2,
        num_segments=8,
    )
    return {
        "assignment_key": assignment_key("run-v", 3, "cd" * 32),
        "selection_seed": selection_seed(**args).hex(),
        "audits": [[a.hotkey, list(a.segments), a.probation] for a in audits],
    }


def _merged(outer: dict[str, Any]) -> Any:
    """The frozen three-island merge of the tiny model, under ``outer`` (the manifest's
    outer section): (the merge result, the start parameters, the manifest)."""
    from hypertrain.aggregator.blobs import MemoryBlobs
    from hypertrain.aggregator.merge import MergeInputs, max_tokens, merge
    from hypertrain.aggregator.tape import Candidate
    from hypertrain.protocol.identity import Hotkey
    from hypertrain.protocol.manifest import RunManifest
    from hypertrain.trainer.blob import encode_model_blob
    from hypertrain.trainer.codec import encode_int8

    config = _tiny_config()
    manifest = RunManifest.model_validate(
        {
            "run_id": "run-v",
            "seed": 11,
            "model": config.model.model_dump(mode="json"),
            "round": {"inner_steps": 4, "checkpoint_interval": 2},
            "outer": outer,
            "compression": {"block_size": 64},
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
    blobs = MemoryBlobs()
    params = _fixed_state().params()
    start = blobs.put(encode_model_blob(params, manifest.model), kind="model", round=0)
    candidates = []
    for n in range(3):
        delta = {
            k: _exact(tuple(v.shape), 20 + n + i) / 256 for i, (k, v) in enumerate(params.items())
        }
        data = encode_int8(delta, manifest.compression.block_size)
        blobs.put(data, kind="update", round=0)
        hotkey = Hotkey.from_seed(bytes([0x50 + n]) * 32).ss58_address
        sha = hashlib.sha256(data).hexdigest()
        tokens = max_tokens(manifest) - n
        candidates.append(Candidate(hotkey=hotkey, update_sha256=sha, tokens=tokens,
                                    update_bytes=len(data)))  # fmt: skip
    proven = [c.hotkey for c in candidates]  # audit-proven: they set the reference norm
    inputs = MergeInputs(manifest, 0, start, None, candidates, proven=proven)
    return merge(inputs, blobs), params, manifest


def merge_tape() -> Answer:
    result, _, _ = _merged({})
    return {
        "tape_sha256": result.tape.sha256(),
        "new_model_sha256": result.tape.new_model_sha256,
        "new_outer_state_sha256": result.tape.new_outer_state_sha256,
        "included": [i.hotkey for i in result.tape.included],
    }


def broadcast() -> Answer:
    """The start-model broadcast of the same merge, and the model rebuilt from it."""
    from hypertrain.trainer.broadcast import rebuild_model

    result, params, manifest = _merged({"broadcast": "int8"})
    data = result.broadcast_blob
    blob, _ = rebuild_model(params, data, manifest.model, 64, result.tape.new_model_sha256)
    return {
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "new_model_sha256": result.tape.new_model_sha256,
        "rebuilt_model_sha256": hashlib.sha256(blob).hexdigest(),
        "tape_sha256": result.tape.sha256(),
    }


RECIPES: dict[str, Callable[[], Answer]] = {
    "state_hash": state_hash,
    "checkpoint": checkpoint,
    "carried_state": carried_state,
    "carried_state_bf16": carried_state_bf16,
    "int8_update": int8_update,
    "int4_update": int4_update,
    "int2_update": int2_update,
    "int4_entropy_update": int4_entropy_update,
    "int2_entropy_update": int2_entropy_update,
    "segment": segment,
    "envelope": envelope,
    "permutation": permutation,
    "audit_selection": audit_selection,
    "merge_tape": merge_tape,
    "broadcast": broadcast,
}


def compute_all() -> dict[str, Answer]:
    """Every answer, computed in a child process with the pinned ``PROFILE``."""
    env = {**os.environ, **PROFILE}
    out = subprocess.run(
        [sys.executable, "-m", "tests.known_answers"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"known-answer child failed:\n{out.stderr[-3000:]}")
    answers: dict[str, Answer] = json.loads(out.stdout)
    return answers


def _run_here() -> dict[str, Any]:
    import torch

    from hypertrain.trainer.determinism import configure_determinism

    record = configure_determinism(1)
    answers: dict[str, Any] = {name: recipe() for name, recipe in RECIPES.items()}
    answers["_profile"] = {"aten_cpu_capability": record.settings["aten_cpu_capability"],
                           "torch_version": torch.__version__}  # fmt: skip
    return answers


if __name__ == "__main__":
    sys.stdout.write(json.dumps(_run_here(), indent=1, sort_keys=True) + "\n")
