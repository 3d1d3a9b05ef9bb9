from __future__ import annotations

import pytest
import torch

from hypertrain.protocol.manifest import InnerOptimSpec
from hypertrain.trainer.optim import adamw_update, lr_multiplier, newton_schulz, uses_muon


def test_schedule_warms_up_then_decays_to_the_floor() -> None:
    spec = InnerOptimSpec(warmup_steps=4, total_steps=14, min_lr_ratio=0.1)
    assert lr_multiplier(0, spec) == pytest.approx(0.25)
    assert lr_multiplier(3, spec) == pytest.approx(1.0)
    assert lr_multiplier(4, spec) == pytest.approx(1.0)
    assert lr_multiplier(9, spec) == pytest.approx(0.55)
    assert lr_multiplier(14, spec) == pytest.approx(0.1)
    assert lr_multiplier(1000, spec) == pytest.approx(0.1)
    assert lr_multiplier(0, InnerOptimSpec(warmup_steps=0)) == pytest.approx(1.0)


def test_adamw_matches_torch_reference() -> None:
    spec = InnerOptimSpec(lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(0)
    p = torch.randn(8, 4, generator=gen)
    ref = torch.nn.Parameter(p.clone())
    opt = torch.optim.AdamW([ref], lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    for step in range(1, 6):
        g = torch.randn(8, 4, generator=gen)
        ref.grad = g.clone()
        opt.step()
        adamw_update(p, g, m, v, step, 1e-2, spec)
    torch.testing.assert_close(p, ref.detach(), rtol=1e-6, atol=1e-7)


def test_newton_schulz_orthogonalises() -> None:
    g = torch.randn(3, 16, 8, generator=torch.Generator().manual_seed(1))
    x = newton_schulz(g, 5)
    assert x.shape == g.shape
    singular = torch.linalg.svdvals(x)
    assert float(singular.min()) > 0.5 and float(singular.max()) < 1.3


def test_muon_applies_to_hidden_matrices_only() -> None:
    spec = InnerOptimSpec(name="muon")
    assert uses_muon("layers.0.self_attn.q_proj.weight", (8, 8), spec)
    assert uses_muon("layers.0.mlp.experts.up_proj", (4, 8, 8), spec)
    assert not uses_muon("embed_tokens.weight", (64, 8), spec)
    assert not uses_muon("layers.0.mlp.router.weight", (4, 8), spec)
    assert not uses_muon("norm.weight", (8,), spec)
    assert not uses_muon("layers.0.self_attn.q_proj.weight", (8, 8), InnerOptimSpec())
