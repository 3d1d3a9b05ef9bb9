"""The run sketch: every public update of the run screens a round's, at a bounded cost.

Honest updates are modelled as in tests/aggregator/test_outsider_2.py (one shared
direction per round plus each island's own part, consecutive rounds' directions
correlated 0.5), over a longer run: twelve merged rounds of four updates. The last two
rounds are the exact span (``earlier``), the ten before them the sketch's (``older``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from hypertrain.aggregator.blobs import MemoryBlobs
from hypertrain.aggregator.errors import BlobError
from hypertrain.aggregator.merge import MergeInputs, max_tokens, merge
from hypertrain.aggregator.norms import update_norm
from hypertrain.aggregator.robust import COPY_RESIDUAL
from hypertrain.aggregator.sketch import (
    SKETCH_DIM,
    SketchCache,
    explained,
    hashes,
    update_sketch,
)
from hypertrain.aggregator.tape import Candidate, Earlier, Tape
from hypertrain.aggregator.verify import verify_tape
from hypertrain.trainer.codec import encode_int8
from hypertrain.trainer.model import param_shapes
from hypertrain.trainer.update import iter_decode_update
from tests.aggregator.test_outsider_2 import Tensors, _Round

ROUNDS = 12


class _Run(_Round):
    """Rounds 0 .. ROUNDS - 1 merged (four honest updates each); round ROUNDS open."""

    def __init__(self) -> None:
        super().__init__()
        shared = self.shared
        self.by_round: dict[int, dict[str, Tensors]] = {}
        for index in range(ROUNDS - 1, -1, -1):
            shared = self.mix((0.5, shared), (0.87, self.random()))
            self.by_round[index] = {
                f"h{i}": self.mix((0.6, shared), (0.8, self.random())) for i in range(4)
            }
        public = [
            Earlier(round=r, hotkey=h, update_sha256=self.blobs.put(self.encode(t)), proven=True)
            for r in range(ROUNDS)
            for h, t in self.by_round[r].items()
        ]
        self.earlier = [e for e in public if e.round >= ROUNDS - 2]
        self.older = [e for e in public if e.round < ROUNDS - 2]

    def scaled(self, index: int, hotkey: str, factor: float) -> Tensors:
        return {n: factor * t for n, t in self.by_round[index][hotkey].items()}

    def tape(self, attackers: dict[str, Tensors], older: bool = True) -> Tape:
        tokens = max_tokens(self.manifest)
        candidates = []
        for seq, (hotkey, tensors) in enumerate({**self.honest, **attackers}.items()):
            data = self.encode(tensors)
            sha = self.blobs.put(data)
            candidates.append(
                Candidate(
                    hotkey=hotkey, update_sha256=sha, tokens=tokens, update_bytes=len(data), seq=seq
                )
            )
        shapes = [(k, tuple(v.shape)) for k, v in self.start.items()]
        proven = update_norm(self.encode(self.by_round[ROUNDS - 1]["h0"]), shapes)
        inputs = MergeInputs(
            manifest=self.manifest, round=ROUNDS, start_model_sha256=self.start_sha,
            prev_outer_state_sha256=None, candidates=candidates, history_norms=[proven] * 8,
            earlier=self.earlier, older=self.older if older else [],
        )  # fmt: skip
        tape = merge(inputs, self.blobs).tape
        report = verify_tape(tape, self.blobs)
        assert report.identical, report.first_difference
        return tape


def test_honest_updates_are_not_copies_of_a_long_run() -> None:
    """No honest update is explained by the run's 48 public updates (false positives)."""
    tape = _Run().tape({})
    assert [i.hotkey for i in tape.included] == ["h0", "h1", "h2", "h3"]
    assert tape.excluded == []
    assert len(tape.older) == 40


def test_replays_and_combinations_of_old_public_updates_are_copies() -> None:
    """A rescaled replay from the run's first round, a reversed one, and a combination of
    two old updates of different rounds with a recent one, each re-encoded."""
    run = _Run()
    combined = run.mix(
        (0.5, run.by_round[0]["h1"]), (0.3, run.by_round[4]["h3"]), (0.4, run.by_round[11]["h2"])
    )
    attackers = {
        "z-replay": run.scaled(0, "h2", 0.97),
        "z-reversed": run.scaled(3, "h0", -1.0),
        "z-combined": combined,
    }
    tape = run.tape(attackers)
    why = {e.hotkey: e.reason for e in tape.excluded}
    assert why == dict.fromkeys(attackers, "near_duplicate"), why
    assert [i.hotkey for i in tape.included] == ["h0", "h1", "h2", "h3"]
    detail = {e.hotkey: e.detail for e in tape.excluded}
    assert "h2 of round 0" in detail["z-replay"]


def test_a_tape_without_older_updates_keeps_its_bytes_and_its_decisions() -> None:
    """``older`` is omitted when empty: tapes merged before it verify unchanged (the
    replay from round 0, outside the exact span, is then no copy, as before)."""
    run = _Run()
    tape = run.tape({"z-replay": run.scaled(0, "h2", 0.97)}, older=False)
    assert b'"older"' not in tape.to_bytes()
    why = {e.hotkey: e.reason for e in tape.excluded}
    assert why.get("z-replay") != "near_duplicate", why


def test_the_sketch_is_a_public_function_of_the_bytes() -> None:
    """Anyone recomputes it from the update's bytes and the run id; another run's differs."""
    run = _Run()
    data = run.encode(run.by_round[0]["h0"])
    shapes = param_shapes(run.manifest.model)
    codec = run.manifest.compression
    one = update_sketch(data, run.manifest.run_id, shapes, codec)
    again = SketchCache(run.manifest.run_id).of(
        run.older[0].update_sha256, run.blobs, shapes, codec
    )
    other = update_sketch(data, run.manifest.run_id + "-other", shapes, codec)
    assert one.codes.shape == (SKETCH_DIM,) and int(abs(one.codes).max()) == 32767
    assert (one.codes == again.codes).all() and one.scale == again.scale
    assert not (one.codes == other.codes).all()


def test_a_kept_sketch_survives_a_restart_without_the_blob(tmp_path: Path) -> None:
    """A restarted aggregator reads the sketches it kept instead of fetching and projecting
    every older update again; a partial file is computed again, never half-read."""
    run = _Run()
    shapes, codec = param_shapes(run.manifest.model), run.manifest.compression
    sha = run.older[0].update_sha256
    first = SketchCache(run.manifest.run_id, tmp_path).of(sha, run.blobs, shapes, codec)
    restarted = SketchCache(run.manifest.run_id, tmp_path)
    kept = restarted.of(sha, MemoryBlobs(), shapes, codec)  # no blob: read from the file
    assert (kept.codes == first.codes).all() and kept.scale == first.scale
    path = tmp_path / f"{sha}.sketch"
    path.write_bytes(path.read_bytes()[:100])  # a write cut short
    again = SketchCache(run.manifest.run_id, tmp_path).of(sha, run.blobs, shapes, codec)
    assert (again.codes == first.codes).all() and again.scale == first.scale
    with pytest.raises(BlobError):  # neither kept nor fetchable: loud
        SketchCache(run.manifest.run_id, tmp_path).of("ab" * 32, MemoryBlobs(), shapes, codec)


@pytest.mark.xfail(
    strict=True,
    reason="open: the run sketch is public; a perturbation in the span of its rows hides a copy",
)
def test_a_copy_perturbed_against_the_public_sketch_is_still_a_copy() -> None:
    """Proves a replay plus a small perturbation crafted from the public hashes (0.97 u +
    r, with S r moving the sketch to a random point; |r| about sqrt(2 * 1024 / 2^20) of
    the norm) is explained by the replayed update's sketch. Today it is not: the known
    limit of a public fixed-size projection (docs/threats.md, Merge)."""
    run, numel = _Run(), 1 << 20
    shapes, codec = [("w", (numel,))], run.manifest.compression
    gen = torch.Generator().manual_seed(11)
    old = encode_int8({"w": torch.randn(numel, generator=gen)}, codec.block_size)
    decoded = update_sketch(old, run.manifest.run_id, shapes, codec)
    values = _decoded(old, shapes, codec)
    buckets, signs = next(hashes(run.manifest.run_id, "w", numel))
    counts = np.bincount(buckets, minlength=SKETCH_DIM).astype(np.float64)
    su = np.bincount(buckets, weights=signs * 0.97 * values, minlength=SKETCH_DIM)
    target = np.random.default_rng(5).standard_normal(SKETCH_DIM)
    target *= np.linalg.norm(su) / np.linalg.norm(target)
    r = signs * ((target - su) / counts)[buckets]
    copy = 0.97 * values + r
    along = copy @ values / (values @ values) * values
    assert np.linalg.norm(copy - along) / np.linalg.norm(copy) < COPY_RESIDUAL  # a copy
    data = encode_int8({"w": torch.from_numpy(copy.astype(np.float32))}, codec.block_size)
    mine = update_sketch(data, run.manifest.run_id, shapes, codec)
    atoms = decoded.codes[None, :]
    assert explained(mine, atoms, np.array([decoded.scale])) is not None


def _decoded(data: bytes, shapes: list[tuple[str, tuple[int, ...]]], codec: Any) -> np.ndarray:
    return np.concatenate(
        [t.numpy().astype(np.float64).ravel() for _, t in iter_decode_update(data, codec, shapes)]
    )
