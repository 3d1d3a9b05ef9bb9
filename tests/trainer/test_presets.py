from __future__ import annotations

import pytest

from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import (
    PRESETS,
    flops_per_token,
    get_preset,
    param_count,
    proxy,
    with_vocab,
)


def test_50m_is_the_brief_model() -> None:
    spec = PRESETS["50m"]
    assert (spec.vocab_size, spec.d_model, spec.num_layers) == (50_000, 512, 8)
    assert (spec.num_heads, spec.head_dim, spec.ffn_hidden, spec.context_length) == (
        8,
        64,
        1536,
        2048,
    )
    assert spec.tied_embeddings and spec.moe is None
    assert param_count(spec) == 52_871_680


@pytest.mark.parametrize("name", ["tiny", "tiny-moe"])
def test_param_count_matches_real_tensors(name: str) -> None:
    spec = PRESETS[name]
    assert param_count(spec) == sum(t.numel() for t in init_params(spec, 0).values())


def test_proxy_size_and_vocab_override() -> None:
    assert 1_000_000 <= param_count(PRESETS["proxy"]) <= 5_000_000
    small = proxy(vocab_size=3000)
    assert small.vocab_size == 3000 and small.d_model == PRESETS["proxy"].d_model
    assert with_vocab(PRESETS["tiny"], 100).vocab_size == 100
    assert PRESETS["proxy-moe"].moe is not None


def test_flops_per_token() -> None:
    spec = PRESETS["tiny"]
    flops = flops_per_token(spec, seq_len=16)
    assert flops["train"] == 3 * flops["forward"]
    assert flops["forward"] > 2 * (param_count(spec) - 2 * spec.d_model * 2 - spec.d_model)


def test_unknown_preset_is_refused() -> None:
    with pytest.raises(TrainerError, match="unknown preset"):
        get_preset("gpt5")
    with pytest.raises(ValueError):
        with_vocab(PRESETS["tiny"], 1)
