"""Real submissions for competition tests: tiny Llama models trained briefly on real text."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hypertrain.data.dataset import Dataset
from hypertrain.protocol.manifest import ModelSpec
from hypertrain.trainer.export import export_llama
from hypertrain.trainer.model import init_params, loss_fn
from hypertrain.trainer.presets import get_preset, with_vocab
from tests.auditor.world import make_dataset

ASSETS = Path(__file__).resolve().parents[1] / "assets"


class Trained:
    """A real dataset and four tiny models trained on it (the ``trained`` fixture): 15 and
    60 AdamW steps, a blend a hair better than the first, and one that learned the public
    held-out split by heart. Each model is trained when a test first reads it (once per
    test process, whichever test asks first: training seeds itself, so the bytes are the
    same); most tests read the dataset and the weak model only."""

    def __init__(self, root: Path) -> None:
        self.dataset = dataset(root)
        self.dataset_dir = root / "dataset"
        self.spec = model_spec(self.dataset)

    @cached_property
    def weak(self) -> dict[str, torch.Tensor]:
        """The incumbent."""
        return train(self.dataset, self.spec, steps=15)

    @cached_property
    def strong(self) -> dict[str, torch.Tensor]:
        """Clearly better than the incumbent."""
        return train(self.dataset, self.spec, steps=60)

    @cached_property
    def slightly(self) -> dict[str, torch.Tensor]:
        """A hair better than the incumbent (within epsilon)."""
        return blend(self.weak, self.strong, 0.01)

    @cached_property
    def public(self) -> dict[str, torch.Tensor]:
        """Memorized the public held-out split (:func:`memorize`)."""
        return memorize(self.dataset, self.spec)


def dataset(out: Path) -> Dataset:
    return make_dataset(ASSETS, out / "dataset", text_bytes=40_000)


def model_spec(ds: Dataset) -> ModelSpec:
    return with_vocab(get_preset("tiny"), ds.descriptor.vocab_size)


def train(
    ds: Dataset, spec: ModelSpec, steps: int, seed: int = 5, ids: Any = None
) -> dict[str, torch.Tensor]:
    """``steps`` AdamW steps of 8 samples each (deterministic), from ``ids`` or the train split."""
    torch.manual_seed(seed)
    params = {k: v.clone().requires_grad_(True) for k, v in init_params(spec, seed).items()}
    opt = torch.optim.AdamW(params.values(), lr=3e-3)
    split = ds.split()
    train_ids = (
        split.train_ids(np.arange(split.train_count, dtype=np.uint64)) if ids is None else ids
    )
    for step in range(steps):
        ids = [int(train_ids[(step * 8 + j) % len(train_ids)]) for j in range(8)]
        batch = torch.stack([torch.from_numpy(ds.sample(i).astype("int64")) for i in ids])
        opt.zero_grad()
        loss_fn(params, spec, batch).backward()
        opt.step()
    return {k: v.detach() for k, v in params.items()}


def memorize(ds: Dataset, spec: ModelSpec, steps: int = 600) -> dict[str, torch.Tensor]:
    """A model that learned the published held-out split by heart (an outsider reads it
    with the rest of the dataset): far ahead on those pages, which a public evaluation
    set would score, and behind an honestly trained model on text it never saw."""
    heldout = [int(i) for i in ds.split().heldout_ids]
    return train(ds, spec, steps=steps, ids=heldout)


def page_losses_of(directory: Path, ds: Dataset, pages: torch.Tensor) -> tuple[float, ...]:
    """The exported model's loss on each of ``pages``, as an evaluator computes it."""
    from hypertrain.competition.spec import CompetitionSpec
    from hypertrain.evaluator.scorer import load_model, page_losses

    model, _ = load_model(directory, CompetitionSpec.model_validate(spec_doc(ds)))
    return tuple(page_losses(model, pages, 8))


def weight_taker(ds: Dataset, older: tuple[float, ...], newer: tuple[float, ...]) -> str:
    """``older`` or ``newer``: which of two entries (committed in that order) takes the
    cycle's weight when these are their page losses."""
    from hypertrain.competition.scoring import Entry, standings
    from hypertrain.competition.spec import CompetitionSpec

    spec = CompetitionSpec.model_validate(spec_doc(ds))
    entries = [Entry("older", "a" * 64, 1, 0, older), Entry("newer", "b" * 64, 2, 1, newer)]
    table = standings(entries, spec.epsilon, 10, temperature=0.01, units=1000)
    assert table[0].weight >= 0.95
    return table[0].hotkey


def blend(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], alpha: float) -> dict[str, Any]:
    """``a + alpha (b - a)``: a model a little better than ``a`` when ``b`` is better."""
    return {k: a[k] + alpha * (b[k] - a[k]) for k in a}


def export(params: dict[str, torch.Tensor], spec: ModelSpec, out: Path) -> Path:
    return export_llama(params, spec, out)


def spec_doc(ds: Dataset, cid: str = "comp-1", **over: Any) -> dict[str, Any]:
    """A competition spec over ``ds`` for the tiny preset."""
    data = ds.descriptor.data_spec()
    doc: dict[str, Any] = {
        "competition_id": cid,
        "architecture": {
            "vocab_size": ds.descriptor.vocab_size,
            "min_params": 1_000,
            "max_params": 200_000,
            "max_bytes": 4 << 20,
            "max_context_length": 64,
        },
        "data": {
            "dataset_root": data.dataset_root,
            "descriptor_sha256": data.descriptor_sha256,
            "tokenizer_sha256": data.tokenizer_sha256,
            "pool_root": data.dataset_root,  # a stand-in; see pool_spec_doc
            "pool_count": len(ds),
            "seq_len": data.seq_len,
            "pages_per_eval": 24,
            "batch_pages": 8,
        },
        "epsilon": {"kind": "constant", "start": 0.005, "end": 0.005},
        "cycle": {
            "eligibility_delay_rounds": 2,
            "eval_interval_rounds": 5,
            "score_window_rounds": 6,
            "model_time_limit_s": 5,  # the window holds it on the tests' beacons (>= 1 s)
        },
        "reward": {"pool_per_cycle": 1_000_000, "temperature": 0.01, "vesting_rounds": 1},
    }
    doc.update(over)
    return doc


def pool_dataset(public: Path, out: Path, start: int = 40_000, stop: int = 70_000) -> Dataset:
    """A secret evaluation pool: other text, tokenized with the public dataset's tokenizer.

    ``public`` is the folder :func:`dataset` was given (its corpus trains the same
    tokenizer again, deterministically).
    """
    from hypertrain.data import PrepareOptions, prepare, train_tokenizer
    from hypertrain.data.descriptor import DESCRIPTOR_NAME
    from hypertrain.data.tokenizer import tokenizer_from_bytes

    tok = tokenizer_from_bytes(train_tokenizer([public / "corpus.txt"], 300))
    corpus = out / "pool.txt"
    out.mkdir(parents=True, exist_ok=True)
    corpus.write_bytes((ASSETS / "tinyshakespeare.txt").read_bytes()[start:stop])
    prepare([corpus], tok, 16, out / "pool", PrepareOptions(heldout_fraction=0.05))
    return Dataset(out / "pool" / DESCRIPTOR_NAME)


def pool_spec_doc(ds: Dataset, pool: Dataset, cid: str = "comp-1", **over: Any) -> dict[str, Any]:
    """:func:`spec_doc` with the pool's root and count filled in."""
    from hypertrain.competition.pool import pool_tree

    samples = np.stack([pool.sample(i) for i in range(len(pool))])
    doc = spec_doc(ds, cid, **over)
    doc["data"] |= {"pool_root": pool_tree(samples).root.hex(), "pool_count": len(pool)}
    return doc


def tiny_llama(out: Path) -> Any:
    """A random 300-token Llama saved as config.json + model.safetensors (float32)."""
    import transformers

    torch.manual_seed(3)
    config = transformers.LlamaConfig(
        vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config).eval()
    model.save_pretrained(out, safe_serialization=True)
    for extra in out.iterdir():
        if extra.name not in ("config.json", "model.safetensors"):
            extra.unlink()
    return model
