"""Competition mode: evaluation throughput and the cost of scoring 16 models × 64 pages.

* ``eval_tokens_per_s``: the evaluator's page losses (``page_losses``: fixed batches of
  ``batch_pages``, per-page cross-entropy) of a proxy-size Llama model, against a plain
  ``transformers`` forward of the same model on the same pages in one batch with the
  library's mean loss (``plain_tokens_per_s``), best of 3 each, in the same run.
* ``evaluate_16x64_s``: 16 distinct proxy-size models, each checked against the spec,
  loaded through ``transformers`` and scored on 64 pages (what one evaluator does per
  cycle with 16 submissions), and ``score_16x64_ms``: the scoring rule over their losses
  (pairwise page wins and softmax weights), which is what the service computes.

    .venv/bin/python benchmarks/bench_competition.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from common import best_of, write_result
from hypertrain.competition.scoring import Entry, standings
from hypertrain.competition.spec import CompetitionSpec, EpsilonSchedule
from hypertrain.data import PrepareOptions, prepare, train_tokenizer
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.data.tokenizer import tokenizer_from_bytes
from hypertrain.evaluator.scorer import load_model, page_batch, page_losses
from hypertrain.evaluator.scorer import prepare as setup
from hypertrain.trainer.export import export_llama
from hypertrain.trainer.model import init_params
from hypertrain.trainer.presets import proxy

REPO = Path(__file__).resolve().parents[1]
PAGES, MODELS, SEQ_LEN, VOCAB = 64, 16, 128, 512


def _dataset(root: Path) -> tuple[Dataset, Path]:
    corpus = root / "corpus.txt"
    corpus.write_bytes((REPO / "tests" / "assets" / "tinyshakespeare.txt").read_bytes()[:400_000])
    tok = tokenizer_from_bytes(train_tokenizer([corpus], VOCAB))
    out = root / "dataset"
    prepare([corpus], tok, SEQ_LEN, out, PrepareOptions(heldout_fraction=0.1))
    return Dataset(out / DESCRIPTOR_NAME), out


def _spec(ds: Dataset) -> CompetitionSpec:
    data = ds.descriptor.data_spec()
    return CompetitionSpec.model_validate({
        "competition_id": "bench",
        "architecture": {"vocab_size": ds.descriptor.vocab_size, "max_context_length": 4096},
        "data": {
            "dataset_root": data.dataset_root, "descriptor_sha256": data.descriptor_sha256,
            "tokenizer_sha256": data.tokenizer_sha256,
            "heldout_count": len(ds.split().heldout_ids), "seq_len": SEQ_LEN,
            "pages_per_eval": PAGES, "batch_pages": 8,
        },
    })  # fmt: skip


def main() -> None:
    setup_threads = 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ds, _ = _dataset(root)
        spec = _spec(ds)
        setup(spec, setup_threads)
        model_spec = proxy(ds.descriptor.vocab_size).model_copy(update={"context_length": 256})
        dirs = [
            export_llama(init_params(model_spec, seed), model_spec, root / f"m{seed}")
            for seed in range(MODELS)
        ]
        pages = list(range(min(PAGES, spec.data.heldout_count)))
        batch = page_batch(ds, pages)
        tokens = batch.shape[0] * (batch.shape[1] - 1)
        model, summary = load_model(dirs[0], spec)

        def ours() -> None:
            page_losses(model, batch, spec.data.batch_pages)

        def plain() -> None:
            with torch.no_grad():
                model(input_ids=batch, labels=batch).loss.item()

        ours_s, plain_s = best_of(ours), best_of(plain)
        start = time.perf_counter()
        losses = []
        for directory in dirs:
            m, _ = load_model(directory, spec)
            losses.append(page_losses(m, batch, spec.data.batch_pages))
        evaluate_s = time.perf_counter() - start
        entries = [
            Entry(f"hk{i}", f"{i:064x}", i, f"id{i}", tuple(v)) for i, v in enumerate(losses)
        ]
        score_s = best_of(
            lambda: standings(entries, EpsilonSchedule(), 100, temperature=0.01, units=10**6)
        )
    write_result(
        "competition",
        {
            "model_params": summary.num_params,
            "pages": len(pages),
            "tokens_per_page": batch.shape[1] - 1,
            "eval_tokens_per_s": tokens / ours_s,
            "plain_tokens_per_s": tokens / plain_s,
            "eval_vs_plain_ratio": plain_s / ours_s,
            "evaluate_16x64_s": evaluate_s,
            "score_16x64_ms": score_s * 1000,
            "threads": setup_threads,
        },
        targets={"eval_vs_plain_ratio": "close to 1 (fixed batches cost little)"},
        notes=(
            "Proxy preset (vocabulary 512, context 256), 1 intra-op thread, float32, eager"
            " attention, 64 held-out pages of 128 tokens of the repository's Shakespeare text."
            " The evaluator runs fixed batches of 8 pages and keeps per-page losses; the plain"
            " baseline is one transformers forward of all pages with the library's mean loss."
            " evaluate_16x64_s includes the spec checks and transformers loading of 16 models."
        ),
    )


if __name__ == "__main__":
    main()
