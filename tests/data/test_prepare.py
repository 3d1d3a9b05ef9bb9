"""Preparing a corpus: fixed-length samples, a deterministic root, honest counts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hypertrain.data import Dataset, LoadedTokenizer, PrepareOptions, prepare
from hypertrain.data.descriptor import DESCRIPTOR_NAME, dtype_for_vocab
from hypertrain.data.errors import DataError, EmptyDocumentError
from hypertrain.data.prepare import Packer
from hypertrain.protocol.manifest import DataSpec
from hypertrain.protocol.merkle import MerkleTree
from tests.data.conftest import SEQ_LEN


def test_same_corpus_gives_same_root_and_descriptor(
    dataset_dir: Path, corpus_files: list[Path], tokenizer: LoadedTokenizer, tmp_path: Path
) -> None:
    opts = PrepareOptions(heldout_fraction=0.05, samples_per_shard=300)
    again = prepare(corpus_files, tokenizer, SEQ_LEN, tmp_path / "again", opts)
    first = (dataset_dir / DESCRIPTOR_NAME).read_bytes()
    assert (tmp_path / "again" / DESCRIPTOR_NAME).read_bytes() == first
    for shard in again.shards:
        assert (tmp_path / "again" / shard.file).read_bytes() == (
            dataset_dir / shard.file
        ).read_bytes()


def test_descriptor_counts_and_root(dataset: Dataset, tokenizer: LoadedTokenizer) -> None:
    d = dataset.descriptor
    assert d.seq_len == SEQ_LEN and d.token_dtype == "uint16"
    assert d.corpus.tokens == d.sample_count * SEQ_LEN + d.corpus.tail_tokens_dropped
    assert d.corpus.documents == 9 and d.corpus.empty_documents == 0
    assert [s.name for s in d.corpus.sources] == ["shakespeare_slice.txt", "fineweb_train.jsonl"]
    assert d.split.heldout_count > 0 and d.split.train_count > d.split.heldout_count
    leaves = [dataset.sample_hash(i) for i in range(d.sample_count)]
    assert MerkleTree.from_leaves(leaves).root_hex == d.dataset_root
    assert d.eod_id == tokenizer.eod_id and d.tokenizer_sha256 == tokenizer.sha256
    spec = d.data_spec()
    assert isinstance(spec, DataSpec) and spec.sample_count == d.sample_count


def test_documents_are_separated_by_eod(
    tokenizer: LoadedTokenizer, assets_dir: Path, tmp_path: Path
) -> None:
    desc = prepare([assets_dir / "fineweb_train.jsonl"], tokenizer, 32, tmp_path / "d")
    ds = Dataset(tmp_path / "d" / DESCRIPTOR_NAME)
    stream = np.concatenate([ds.sample(i) for i in range(len(ds))])
    assert all(len(ds.sample(i)) == 32 for i in range(len(ds)))
    eods = int((stream == tokenizer.eod_id).sum())
    assert eods in (desc.corpus.documents, desc.corpus.documents - 1)  # last may be in the tail
    first_doc = json.loads((assets_dir / "fineweb_train.jsonl").read_text().splitlines()[0])
    expected = tokenizer.encode_batch([first_doc["text"]])[0]
    assert stream[: len(expected)].tolist() == expected
    assert int(stream[len(expected)]) == tokenizer.eod_id


def test_parquet_and_jsonl_give_the_same_dataset(
    tokenizer: LoadedTokenizer, assets_dir: Path, tmp_path: Path
) -> None:
    lines = (assets_dir / "fineweb_train.jsonl").read_text().splitlines()
    pqf = tmp_path / "fw.parquet"
    pq.write_table(pa.table({"text": [json.loads(x)["text"] for x in lines]}), pqf)
    a = prepare([assets_dir / "fineweb_train.jsonl"], tokenizer, 32, tmp_path / "a")
    b = prepare([pqf], tokenizer, 32, tmp_path / "b")
    assert a.dataset_root == b.dataset_root and a.sample_count == b.sample_count


def test_packer_keeps_the_tail() -> None:
    packer = Packer(4)
    assert packer.feed(np.arange(6, dtype=np.uint32)).tolist() == [[0, 1, 2, 3]]
    assert packer.feed(np.arange(6, 9, dtype=np.uint32)).tolist() == [[4, 5, 6, 7]]
    assert packer.leftover == 1


def test_dtype_by_vocab_size() -> None:
    assert dtype_for_vocab(50_000) == "uint16"
    assert dtype_for_vocab(65_536) == "uint16"
    assert dtype_for_vocab(65_537) == "uint32"


def test_bad_prepare_inputs(
    tokenizer: LoadedTokenizer, dataset_dir: Path, assets_dir: Path, tmp_path: Path
) -> None:
    jl = assets_dir / "fineweb_eval.jsonl"
    with pytest.raises(DataError, match="already holds a dataset"):
        prepare([jl], tokenizer, 32, dataset_dir)
    with pytest.raises(DataError, match="fewer than one sample"):
        prepare([jl], tokenizer, 100_000, tmp_path / "big")
    with pytest.raises(DataError, match="seq_len"):
        prepare([jl], tokenizer, 1, tmp_path / "x")
    with pytest.raises(DataError, match="heldout fraction"):
        prepare([jl], tokenizer, 32, tmp_path / "x", PrepareOptions(heldout_fraction=1.0))
    with pytest.raises(DataError, match="not a file"):
        prepare([tmp_path / "nope.txt"], tokenizer, 32, tmp_path / "x")
    with pytest.raises(DataError, match="no input"):
        prepare([], tokenizer, 32, tmp_path / "x")
    empties = tmp_path / "e.jsonl"
    empties.write_text('{"text": "hello there"}\n{"text": ""}\n')
    with pytest.raises(EmptyDocumentError):
        prepare([empties], tokenizer, 2, tmp_path / "y", PrepareOptions(empty_policy="error"))
    desc = prepare([empties], tokenizer, 2, tmp_path / "z")
    assert desc.corpus.empty_documents == 1 and desc.corpus.documents == 1
