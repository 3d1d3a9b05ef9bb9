from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import LlamaForCausalLM

from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.export import export_llama
from hypertrain.trainer.model import forward, init_params
from hypertrain.trainer.presets import PRESETS


def test_export_loads_in_transformers_with_same_logits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = PRESETS["tiny"]
    params = init_params(spec, 11)
    out = export_llama(params, spec, tmp_path / "hf")
    config = json.loads((out / "config.json").read_text())
    assert config["tie_word_embeddings"] is True and config["architectures"] == ["LlamaForCausalLM"]
    model = LlamaForCausalLM.from_pretrained(str(out)).eval()
    tokens = torch.randint(0, spec.vocab_size, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs = model(tokens).logits
    ours, _ = forward(params, spec, tokens)
    torch.testing.assert_close(ours.detach(), theirs, rtol=1e-4, atol=1e-5)


def test_moe_export_is_refused(tmp_path: Path) -> None:
    spec = PRESETS["tiny-moe"]
    with pytest.raises(TrainerError, match="dense"):
        export_llama(init_params(spec, 0), spec, tmp_path)


def test_export_with_tokenizer_generates_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hypertrain.data.tokenizer import train_tokenizer
    from hypertrain.devnet.evaluate import sample_text
    from hypertrain.trainer.export import export_tokenizer
    from hypertrain.trainer.presets import with_vocab

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    corpus = Path(__file__).parents[1] / "assets" / "tinyshakespeare.txt"
    small = tmp_path / "corpus.txt"
    small.write_text(corpus.read_text(encoding="utf-8")[:20000], encoding="utf-8")
    (tmp_path / "tokenizer.json").write_bytes(train_tokenizer([small], 300))
    spec = with_vocab(PRESETS["tiny"], 300)
    out = export_llama(init_params(spec, 3), spec, tmp_path / "hf")
    export_tokenizer(tmp_path / "tokenizer.json", spec, out)
    text = sample_text(out, "ROMEO:", tokens=8)
    assert text.startswith("ROMEO:") and len(text) > len("ROMEO:")
    assert sample_text(tmp_path / "nothing") == ""  # no tokenizer there: no sample
