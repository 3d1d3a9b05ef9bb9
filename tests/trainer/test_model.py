from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from hypertrain.trainer.export import llama_config, llama_state_dict
from hypertrain.trainer.model import forward, init_params, param_shapes
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.tracing import Tracer


def _hf_model(spec_name: str, params: dict[str, torch.Tensor]) -> LlamaForCausalLM:
    spec = PRESETS[spec_name]
    cfg = {k: v for k, v in llama_config(spec).items() if k not in ("architectures", "model_type")}
    model = LlamaForCausalLM(LlamaConfig(**cfg)).eval()
    missing, unexpected = model.load_state_dict(llama_state_dict(params, spec), strict=False)
    assert not unexpected
    assert set(missing) <= {"lm_head.weight"}
    model.tie_weights()
    return model


def test_llama_oracle_logits_match() -> None:
    spec = PRESETS["tiny"]
    params = init_params(spec, seed=3)
    # Perturb norms so the test also covers the gains, not just ones.
    gen = torch.Generator().manual_seed(1)
    for name in params:
        if name.endswith("norm.weight"):
            params[name] = 1 + 0.1 * torch.randn(params[name].shape, generator=gen)
    tokens = torch.randint(0, spec.vocab_size, (2, 24), generator=gen)
    ours, _ = forward(params, spec, tokens)
    with torch.no_grad():
        theirs = _hf_model("tiny", params)(tokens).logits
    torch.testing.assert_close(ours.detach(), theirs, rtol=1e-4, atol=1e-5)


def test_init_uses_only_its_seed() -> None:
    spec = PRESETS["tiny"]
    torch.manual_seed(123)
    a = init_params(spec, 7)
    torch.manual_seed(999)
    b = init_params(spec, 7)
    c = init_params(spec, 8)
    assert list(a) == [n for n, _ in param_shapes(spec)]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["embed_tokens.weight"], c["embed_tokens.weight"])


def test_tracer_records_layers_and_ops_without_changing_results() -> None:
    spec = PRESETS["tiny"]
    params = init_params(spec, 0)
    tokens = torch.randint(0, spec.vocab_size, (1, 8), generator=torch.Generator().manual_seed(0))
    plain, _ = forward(params, spec, tokens)
    tracer = Tracer()
    with tracer.ops():
        traced, _ = forward(params, spec, tokens, tracer)
    assert torch.equal(plain, traced)
    names = [n for n, _ in tracer.entries]
    assert "layers.0" in names and "logits" in names
    assert sum(n.startswith("op:") for n in names) > 20
    again = Tracer()
    with again.ops():
        forward(params, spec, tokens, again)
    assert tracer.first_difference(again) is None
    params["norm.weight"] = params["norm.weight"] * 1.5
    other = Tracer()
    with other.ops():
        forward(params, spec, tokens, other)
    index = tracer.first_difference(other)
    assert index is not None and index > 0
