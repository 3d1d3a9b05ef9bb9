"""Corpus preparation on first use, cached afterwards.

The devnet trains a byte-level BPE tokenizer on the repository's test corpus and
tokenizes, packs and shards it. Both are deterministic, so the result is cached
under a key made of the corpus bytes' hash and the settings; a second run reuses
the cached dataset directory instead of repeating the work.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path

from hypertrain.data import PrepareOptions, prepare, train_tokenizer
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.data.tokenizer import tokenizer_from_bytes
from hypertrain.devnet.errors import DevnetError

log = logging.getLogger(__name__)
HELDOUT_FRACTION = 0.02
TOKENIZER_NAME = "tokenizer.json"


def default_corpus() -> tuple[Path, ...]:
    """The repository's test corpus (tests/assets), found from the source checkout."""
    assets = Path(__file__).resolve().parents[3] / "tests" / "assets"
    corpus = assets / "tinyshakespeare.txt"
    if not corpus.is_file():
        raise DevnetError(
            f"no corpus at {corpus}; run from a source checkout or pass --corpus FILE"
        )
    return (corpus,)


def cache_key(corpus: tuple[Path, ...], vocab_size: int, seq_len: int) -> str:
    digest = hashlib.sha256(f"v2|{vocab_size}|{seq_len}".encode())
    for path in corpus:
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError as exc:
            raise DevnetError(f"cannot read corpus file {path}: {exc.strerror}") from None
    return digest.hexdigest()[:16]


def prepared_dataset(
    cache_dir: Path, corpus: tuple[Path, ...], vocab_size: int, seq_len: int
) -> Path:
    """The dataset directory for these settings, preparing it on first use."""
    out = cache_dir / f"dataset-{cache_key(corpus, vocab_size, seq_len)}"
    if (out / DESCRIPTOR_NAME).is_file():
        log.info("using the cached dataset %s", out)
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    log.info("training a %d-token tokenizer and preparing the corpus (first run only)", vocab_size)
    tokenizer_bytes = train_tokenizer(list(corpus), vocab_size)
    tokenizer = tokenizer_from_bytes(tokenizer_bytes)
    prepare(
        list(corpus), tokenizer, seq_len, tmp, PrepareOptions(heldout_fraction=HELDOUT_FRACTION)
    )
    # The tokenizer travels with the dataset (the manifest pins its hash), so the
    # exported model can ship it and generate text.
    (tmp / TOKENIZER_NAME).write_bytes(tokenizer_bytes)
    Dataset(tmp / DESCRIPTOR_NAME)  # refuse a broken result before caching it
    tmp.rename(out)
    return out
