from __future__ import annotations

import torch

from hypertrain.protocol.manifest import MoESpec
from hypertrain.trainer.model import init_params
from hypertrain.trainer.moe import capacity, moe_ffn, route
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.segment import run_round
from hypertrain.trainer.state import init_state
from tests.trainer.conftest import make_config, make_samples


def test_routing_ties_pick_the_lower_expert() -> None:
    probs = torch.tensor([[0.25, 0.25, 0.25, 0.25], [0.1, 0.4, 0.4, 0.1], [0.3, 0.1, 0.3, 0.3]])
    gates, experts = route(probs, 2)
    assert experts.tolist() == [[0, 1], [1, 2], [0, 2]]
    torch.testing.assert_close(gates.sum(-1), torch.ones(3))


def test_capacity_drops_late_tokens_and_no_drop_keeps_all() -> None:
    spec = PRESETS["tiny-moe"]
    params = init_params(spec, 0)
    x = torch.randn(1, 16, spec.d_model, generator=torch.Generator().manual_seed(0))
    assert spec.moe is not None
    full, aux = moe_ffn(x, params, "layers.0.mlp.", spec.moe)
    tight = MoESpec(num_experts=4, top_k=2, capacity_factor=0.25)
    assert capacity(16, tight) == 2
    dropped, _ = moe_ffn(x, params, "layers.0.mlp.", tight)
    assert full.shape == dropped.shape == x.shape
    assert not torch.equal(full, dropped)
    assert float(aux) > 0


def test_moe_trains_and_is_deterministic() -> None:
    cfg = make_config("tiny-moe", steps=6, interval=3, lr=1e-2)
    start = init_state(cfg.state_config(), 2)
    samples = make_samples(24)
    a = run_round(start, cfg, samples)
    b = run_round(start, cfg, samples)
    assert a.leaves == b.leaves and a.root == b.root
    assert a.losses[-1] < a.losses[0]
    muon = make_config("tiny-moe", steps=2, interval=1, name="muon")
    m1 = run_round(init_state(muon.state_config(), 2), muon, make_samples(8))
    m2 = run_round(init_state(muon.state_config(), 2), muon, make_samples(8))
    assert m1.root == m2.root
