"""Data: tokenizer, token shards, the dataset Merkle root and keyed sample assignment.

Islands train only on samples assigned to them by a keyed permutation over a dataset
whose Merkle root the run manifest publishes; auditors check both. Public API:

Tokenizer (:mod:`.tokenizer`)
    ``train_tokenizer(inputs, vocab_size) -> bytes`` (deterministic canonical
    tokenizer.json), ``write_tokenizer(data, path) -> sha256``,
    ``load_tokenizer(path, expected_sha256) -> LoadedTokenizer`` (refuses a mismatch).
Preparation (:mod:`.prepare`)
    ``prepare(inputs, tokenizer, seq_len, out_dir, PrepareOptions(heldout_fraction=...))
    -> DatasetDescriptor``; inputs are .txt, .jsonl or .parquet (``text`` column),
    streamed. ``DatasetDescriptor.data_spec()`` gives the manifest's ``data`` section.
Reading (:mod:`.dataset`, :mod:`.samples`, :mod:`.loader`)
    ``Dataset(descriptor_path)`` with O(1) ``sample(i)``, ``proof(i)``,
    ``verified_sample(i)``, ``split()``, ``verify()``;
    ``verify_sample(root, i, tokens, proof)`` for a consumer handed a sample;
    ``iter_samples(dataset, ids)`` yields ``(sample_id, tokens)`` in assignment order,
    ``iter_batches`` groups them.
Assignment (:mod:`.permutation`, :mod:`.assignment`)
    ``Permutation(key, n)`` (Feistel + cycle walking, any n >= 1),
    ``derive_assignment_key(run_id, round, beacon_randomness) -> 32 bytes``,
    ``assign_round(round_key, roster, split, state) -> RoundAssignment`` with the
    per-hotkey ids and the next ``EpochState``.

docs/data.md explains the design; docs/protocol-data.md gives the byte layouts.
"""

from __future__ import annotations

from hypertrain.data.assignment import (
    EpochState,
    RoundAssignment,
    assign_round,
    derive_assignment_key,
    warm_start_ids,
)
from hypertrain.data.corpus import CorpusStats, read_pieces
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME, DatasetDescriptor, read_descriptor
from hypertrain.data.errors import DataError
from hypertrain.data.loader import iter_batches, iter_samples
from hypertrain.data.permutation import Permutation
from hypertrain.data.prepare import PrepareOptions, prepare
from hypertrain.data.samples import sample_hash, verify_sample
from hypertrain.data.split import Split
from hypertrain.data.tokenizer import (
    EOD_TOKEN,
    LoadedTokenizer,
    load_tokenizer,
    train_tokenizer,
    write_tokenizer,
)

__all__ = [
    "DESCRIPTOR_NAME",
    "EOD_TOKEN",
    "CorpusStats",
    "DataError",
    "Dataset",
    "DatasetDescriptor",
    "EpochState",
    "LoadedTokenizer",
    "Permutation",
    "PrepareOptions",
    "RoundAssignment",
    "Split",
    "assign_round",
    "derive_assignment_key",
    "iter_batches",
    "iter_samples",
    "load_tokenizer",
    "prepare",
    "read_descriptor",
    "read_pieces",
    "sample_hash",
    "train_tokenizer",
    "verify_sample",
    "warm_start_ids",
    "write_tokenizer",
]
