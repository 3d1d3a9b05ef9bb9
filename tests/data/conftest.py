"""Shared fixtures: a small tokenizer trained on real text and a dataset prepared with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.data import LoadedTokenizer, PrepareOptions, prepare, train_tokenizer
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.data.tokenizer import tokenizer_from_bytes, write_tokenizer

SLICE_BYTES = 200_000
SEQ_LEN = 64


@pytest.fixture(scope="session")
def shakespeare_slice(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "shakespeare_slice.txt"
    path.write_bytes((assets_dir / "tinyshakespeare.txt").read_bytes()[:SLICE_BYTES])
    return path


@pytest.fixture(scope="session")
def tokenizer_bytes(shakespeare_slice: Path, assets_dir: Path) -> bytes:
    return train_tokenizer([shakespeare_slice, assets_dir / "fineweb_train.jsonl"], 600)


@pytest.fixture(scope="session")
def tokenizer_file(tokenizer_bytes: bytes, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    write_tokenizer(tokenizer_bytes, path)
    return path


@pytest.fixture(scope="session")
def tokenizer(tokenizer_bytes: bytes) -> LoadedTokenizer:
    return tokenizer_from_bytes(tokenizer_bytes)


@pytest.fixture(scope="session")
def corpus_files(shakespeare_slice: Path, assets_dir: Path) -> list[Path]:
    return [shakespeare_slice, assets_dir / "fineweb_train.jsonl"]


@pytest.fixture(scope="session")
def dataset_dir(
    corpus_files: list[Path], tokenizer: LoadedTokenizer, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    out = tmp_path_factory.mktemp("ds") / "dataset"
    opts = PrepareOptions(heldout_fraction=0.05, samples_per_shard=300)
    prepare(corpus_files, tokenizer, SEQ_LEN, out, opts)
    return out


@pytest.fixture(scope="session")
def dataset(dataset_dir: Path) -> Dataset:
    return Dataset(dataset_dir / DESCRIPTOR_NAME)
