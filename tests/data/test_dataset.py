"""Reading samples, serving and checking proofs, and refusing tampered data."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from hypertrain.data import Dataset, iter_batches, iter_samples, verify_sample
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.data.errors import (
    DataError,
    DescriptorError,
    SampleProofError,
    SampleRangeError,
    ShardIntegrityError,
)
from hypertrain.protocol.merkle import MerkleProof
from tests.data.conftest import SEQ_LEN


@pytest.fixture
def copy_dir(dataset_dir: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(dataset_dir, out)
    return out


def test_sample_reads_are_memory_mapped_rows(dataset: Dataset, dataset_dir: Path) -> None:
    per_shard = dataset.descriptor.samples_per_shard
    i = per_shard + 7
    raw = np.fromfile(dataset_dir / "shard-00001.bin", dtype="<u2").reshape(-1, SEQ_LEN)
    assert dataset.sample(i).tolist() == raw[7].tolist()
    assert dataset.sample(len(dataset) - 1).shape == (SEQ_LEN,)


def test_proofs_verify_against_the_root(dataset: Dataset) -> None:
    for i in (0, 1, 299, 300, len(dataset) - 1):
        proof = MerkleProof.from_json(dataset.proof(i).to_json())
        verify_sample(dataset.root, i, dataset.sample(i), proof)


def test_proof_for_wrong_root_sample_or_tokens_is_refused(dataset: Dataset) -> None:
    proof = dataset.proof(5)
    tokens = dataset.sample(5)
    with pytest.raises(SampleProofError, match="does not verify"):
        verify_sample(bytes(32), 5, tokens, proof)
    with pytest.raises(SampleProofError, match="not sample 6"):
        verify_sample(dataset.root, 6, dataset.sample(6), proof)
    changed = tokens.copy()
    changed[0] ^= 1
    with pytest.raises(SampleProofError):
        verify_sample(dataset.root, 5, changed, proof)


def test_sample_id_out_of_range(dataset: Dataset) -> None:
    for bad in (-1, len(dataset)):
        with pytest.raises(SampleRangeError, match="out of range"):
            dataset.sample(bad)
        with pytest.raises(SampleRangeError):
            dataset.proof(bad)


def test_tampered_shard_bytes_are_detected(copy_dir: Path) -> None:
    shard = copy_dir / "shard-00000.bin"
    data = bytearray(shard.read_bytes())
    data[10] ^= 0xFF
    shard.write_bytes(bytes(data))
    ds = Dataset(copy_dir / DESCRIPTOR_NAME)
    with pytest.raises(ShardIntegrityError, match=r"shard-00000\.bin does not match"):
        ds.verify()
    with pytest.raises(SampleProofError, match="do not match its committed hash"):
        ds.verified_sample(0)
    with pytest.raises(SampleProofError):
        list(iter_samples(ds, [1, 0]))


def test_truncated_or_missing_files_are_refused(copy_dir: Path) -> None:
    shard = copy_dir / "shard-00001.bin"
    shard.write_bytes(shard.read_bytes()[:-2])
    with pytest.raises(ShardIntegrityError, match="bytes, expected"):
        Dataset(copy_dir / DESCRIPTOR_NAME)
    shard.unlink()
    with pytest.raises(DescriptorError, match="missing"):
        Dataset(copy_dir / DESCRIPTOR_NAME)


def test_tampered_hash_file_or_descriptor(copy_dir: Path, dataset: Dataset) -> None:
    hashes = copy_dir / "sample_hashes.bin"
    data = bytearray(hashes.read_bytes())
    data[0] ^= 1
    hashes.write_bytes(bytes(data))
    with pytest.raises(ShardIntegrityError, match="sample-hash file"):
        Dataset(copy_dir / DESCRIPTOR_NAME)
    desc = copy_dir / DESCRIPTOR_NAME
    with pytest.raises(DescriptorError, match="expected"):
        Dataset(desc, expected_sha256="0" * 64)
    desc.write_text(desc.read_text().replace('"sample_count":', '"sample_count":1', 1))
    with pytest.raises(DescriptorError, match="invalid dataset descriptor"):
        Dataset(desc)


def test_full_verify_and_split(dataset: Dataset) -> None:
    dataset.verify()
    split = dataset.split()
    assert split.train_count == dataset.descriptor.split.train_count
    assert all(split.is_heldout(int(i)) for i in split.heldout_ids)


def test_iterators_keep_assignment_order(dataset: Dataset) -> None:
    ids = [17, 3, 250, 3]
    got = list(iter_samples(dataset, ids))
    assert [sid for sid, _ in got] == ids
    assert all(np.array_equal(t, dataset.sample(sid)) for sid, t in got)
    batches = list(iter_batches(dataset, ids, 3))
    assert [b[0] for b in batches] == [[17, 3, 250], [3]]
    assert batches[0][1].shape == (3, SEQ_LEN) and batches[0][1].dtype == np.int64
    with pytest.raises(DataError, match="batch_size"):
        list(iter_batches(dataset, ids, 0))
