"""Outsider attacks on the merge screens (copies and the norm reference), in process."""

from __future__ import annotations

import hashlib

import torch

from hypertrain.aggregator import dedup, screen
from hypertrain.protocol.manifest import OuterOptimSpec
from hypertrain.trainer.codec import encode_int8

SHAPES = [("a", (64, 64)), ("b", (256,))]


class _Blobs:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def get(self, sha: str) -> bytes:
        return self.data[sha]


def _random(gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {name: torch.randn(shape, generator=gen) for name, shape in SHAPES}


def _duplicates(updates: dict[str, dict[str, torch.Tensor]]) -> dict[str, tuple[str, str]]:
    blobs = _Blobs()
    order: list[tuple[str, str]] = []
    sketches: dict[str, tuple[float, ...]] = {}
    for hotkey, tensors in updates.items():
        data = encode_int8(tensors, 64)
        sha = hashlib.sha256(data).hexdigest()
        blobs.data[sha] = data
        order.append((hotkey, sha))
        sketches[hotkey] = dedup.sketch(data)
    return dedup.find_duplicates(order, sketches, blobs, SHAPES)


def _copies() -> dict[str, dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(0)
    honest, other, noise = _random(gen), _random(gen), _random(gen)
    return {
        "honest": honest,
        "other": other,
        "reversed": {n: -honest[n] for n, _ in SHAPES},
        "noisy": {n: honest[n] + 0.35 * noise[n] for n, _ in SHAPES},
        "average": {n: (honest[n] + other[n]) / 2 for n, _ in SHAPES},
    }


def test_a_reversed_copy_of_an_honest_update_is_not_merged() -> None:
    """-honest has the honest norm and cancels the honest island's work for no compute."""
    found = _duplicates(_copies())
    assert "reversed" in found, "a sign-flipped copy (cosine -1) passes the copy screen"


def test_a_noisy_copy_of_an_honest_update_is_not_merged() -> None:
    """honest + 0.35 noise: cosine 0.94, below the 0.99 threshold, zero compute."""
    found = _duplicates(_copies())
    assert "noisy" in found, "a copy with noise added passes the copy screen"


def test_an_average_of_two_honest_updates_is_not_merged() -> None:
    """(a + b) / 2: cosine 0.70 with each, zero compute, a full share."""
    found = _duplicates(_copies())
    assert "average" in found, "an average of two honest updates passes the copy screen"


def test_two_sybils_cannot_vote_the_one_honest_update_out_of_a_fresh_round() -> None:
    """No trusted norm yet (probation_rounds = 0): the round median is the sybils' norm."""
    result = screen.screen({"honest": 1.0, "s1": 100.0, "s2": 100.0}, OuterOptimSpec())
    assert "honest" not in result.rejected, result.rejected


def test_one_token_sybils_cannot_ratchet_the_reference_until_honest_updates_are_outliers() -> None:
    """History counts updates, not tokens: 3 sybils (any token count) beat 2 honest islands.

    Each round the sybils post norm exactly at the clip threshold (clip 1, effective 2 r);
    the median doubles every 7 rounds and the honest updates are rejected after 28.
    """
    outer = OuterOptimSpec()
    history = [1.0] * 16
    for _ in range(30):
        probe = screen.screen({"h1": 1.0, "h2": 1.0}, outer, history=history[-40:])
        top = probe.clip_threshold
        norms = {"h1": 1.0, "h2": 1.0, "s1": top, "s2": top, "s3": top}
        result = screen.screen(norms, outer, history=history[-40:])
        assert "h1" not in result.rejected, f"honest rejected at reference {result.median}"
        history += [norms[k] * result.clip[k] for k in result.clip]


class _Store(_Blobs):
    def put(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        self.data[sha] = data
        return sha


def test_a_reversed_copy_cannot_cancel_an_honest_update_in_the_merge() -> None:
    """One honest update and its negation (zero compute, the honest norm): both are
    included, so both would be paid, and the merged model equals the start model."""
    from hypertrain.aggregator.merge import MergeInputs, max_tokens, merge
    from hypertrain.aggregator.norms import update_norm
    from hypertrain.aggregator.tape import Candidate
    from hypertrain.protocol.manifest import RunManifest
    from hypertrain.trainer.blob import encode_model_blob
    from hypertrain.trainer.model import init_params
    from tests.challenge.helpers import manifest_doc

    manifest = RunManifest.model_validate(manifest_doc())
    start = init_params(manifest.model, 7)
    blobs = _Store()
    start_sha = blobs.put(encode_model_blob(start, manifest.model))
    gen = torch.Generator().manual_seed(1)
    honest = {n: 0.01 * torch.randn(t.shape, generator=gen) for n, t in start.items()}
    size = manifest.compression.block_size
    updates = [encode_int8(honest, size), encode_int8({n: -v for n, v in honest.items()}, size)]
    tokens = max_tokens(manifest)
    candidates = [
        Candidate(hotkey=hk, update_sha256=blobs.put(u), tokens=tokens, update_bytes=len(u), seq=i)
        for i, (hk, u) in enumerate(zip(["a-honest", "b-reversed"], updates, strict=True))
    ]
    norm = update_norm(updates[0], [(k, tuple(v.shape)) for k, v in start.items()])
    inputs = MergeInputs(
        manifest=manifest, round=0, start_model_sha256=start_sha, prev_outer_state_sha256=None,
        candidates=candidates, history_norms=[norm] * 8,
    )  # fmt: skip
    included = [i.hotkey for i in merge(inputs, blobs).tape.included]
    assert included == ["a-honest"], f"the reversed copy is merged (and paid): {included}"
