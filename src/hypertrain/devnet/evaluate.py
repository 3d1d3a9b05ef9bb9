"""The final model: fetched from the relay, checked, exported for transformers.

Held-out losses are not computed here: the aggregator measures every merged model
on the dataset's fixed held-out slice (:mod:`hypertrain.aggregator.heldout`) and
posts the figure with its merge tape, so the terminal, the report and the web
dashboard all show the same numbers. :func:`heldout_batch` gives the same slice
for tests that check an exported model against those figures.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import torch

from hypertrain.aggregator import heldout
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.devnet.prep import TOKENIZER_NAME
from hypertrain.protocol.manifest import ModelSpec
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.export import export_llama, export_tokenizer

SAMPLE_PROMPT = "ROMEO:"
SAMPLE_TOKENS = 40


def heldout_batch(dataset_dir: Path) -> torch.Tensor:
    """The aggregator's held-out samples of a prepared dataset, as a [B, T] tensor."""
    return heldout.heldout_batch(Dataset(dataset_dir / DESCRIPTOR_NAME))


def fetch_model(url: str, sha256: str, spec: ModelSpec) -> dict[str, torch.Tensor]:
    response = httpx.get(url, timeout=60)
    response.raise_for_status()
    return decode_model_blob(response.content, spec, expected_sha256=sha256)


def export_final(
    params: dict[str, torch.Tensor], spec: ModelSpec, out_dir: Path, dataset_dir: Path | None = None
) -> Path:
    """Write a transformers-loadable Llama directory of the final model, with its tokenizer."""
    export_llama(params, spec, out_dir)
    tokenizer = None if dataset_dir is None else dataset_dir / TOKENIZER_NAME
    if tokenizer is not None and tokenizer.is_file():
        export_tokenizer(tokenizer, spec, out_dir)
    return out_dir


def sample_text(model_dir: Path, prompt: str = SAMPLE_PROMPT, tokens: int = SAMPLE_TOKENS) -> str:
    """A short continuation of ``prompt`` by the exported model, through transformers only.

    Sampling (top-k 40, temperature 0.8) from a fixed seed, so a run's sample is
    reproducible; a model without a tokenizer in its directory gives "".
    """
    if not (model_dir / "tokenizer.json").is_file():
        return ""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    # a weight-loading bar would clutter the devnet's log
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir))
    ids = tok(prompt, return_tensors="pt").input_ids
    torch.manual_seed(0)
    with torch.no_grad():
        out = model.generate(
            ids,
            max_new_tokens=tokens,
            do_sample=True,
            top_k=40,
            temperature=0.8,
            pad_token_id=tok.eos_token_id,
        )
    return str(tok.decode(out[0], skip_special_tokens=True))
