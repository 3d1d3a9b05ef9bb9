"""Fuzz the parsers of everything an island authors: nothing escapes but a typed refusal.

The island writes its checkpoint index (JSON), its checkpoints (binary state stream),
its checkpoint reference (a URL) and its commit body. Whatever the bytes, each parser
either returns a value that satisfies its contract or raises the documented
``ValueError`` subclass; never ``RecursionError``, ``KeyError``, ``OverflowError``
or a crash. ``tests/evidence/corpus`` keeps the malformed indexes found so far.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hypertrain.evidence.errors import IslandInputError, VerificationError
from hypertrain.evidence.index import FORMAT, MAX_INDEX_BYTES, CheckpointIndex, sha_from_url
from hypertrain.evidence.verify import verify_commit
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import InnerOptimSpec, RunManifest
from hypertrain.trainer.checkpoint import checkpoint_size, decode_checkpoint, encode_checkpoint
from hypertrain.trainer.errors import CheckpointError
from hypertrain.trainer.presets import get_preset, with_vocab
from hypertrain.trainer.state import StateConfig, init_state
from tests.challenge.helpers import manifest_doc

CORPUS = Path(__file__).parent / "corpus"
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HEX = "0123456789abcdef"
H = "ab" * 32

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=70),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
hex64 = st.text(alphabet=HEX, min_size=64, max_size=64)


def _index_doc(**over: Any) -> bytes:
    doc = {"format": FORMAT, "round": 0, "leaves": [H], "blobs": [H], **over}
    return json.dumps(doc).encode()


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.json")), ids=lambda p: p.name)
def test_corpus_indexes_are_refused(path: Path) -> None:
    with pytest.raises(VerificationError, match="checkpoint index"):
        CheckpointIndex.from_bytes(path.read_bytes())


def test_oversized_and_deeply_nested_indexes_are_refused() -> None:
    with pytest.raises(VerificationError, match="too large"):
        CheckpointIndex.from_bytes(b" " * (MAX_INDEX_BYTES + 1))
    for depth in (100, 100_000):
        with pytest.raises(VerificationError, match="nested"):
            CheckpointIndex.from_bytes(b"[" * depth + b"]" * depth)
    with pytest.raises(VerificationError, match="leaves, the commit 3"):
        CheckpointIndex.from_bytes(_index_doc(), leaf_count=3)
    assert CheckpointIndex.from_bytes(_index_doc(), leaf_count=1).leaves == (H,)


@FUZZ
@given(st.binary(max_size=512))
@example(b"")
@example(b"\x00" * 64)
@example(b'{"format": 1e999}')
def test_index_from_any_bytes(data: bytes) -> None:
    try:
        index = CheckpointIndex.from_bytes(data)
    except VerificationError:
        return
    assert len(index.leaves) == len(index.blobs) > 0


@FUZZ
@given(
    st.fixed_dictionaries(
        {"format": st.just(FORMAT) | json_values, "round": st.integers() | json_values},
        optional={"leaves": st.lists(hex64 | json_values, max_size=3), "blobs": json_values},
    )
)
def test_index_from_any_json_document(doc: dict[str, Any]) -> None:
    try:
        data = json.dumps(doc).encode()
    except ValueError:
        return
    try:
        index = CheckpointIndex.from_bytes(data)
    except VerificationError:
        return
    assert index.round >= 0 and all(len(h) == 64 for h in index.leaves)


@FUZZ
@given(st.text(max_size=200))
@example("http://relay/blobs/" + H)
@example("http://relay/blobs/" + H.upper())
@example("/" * 5)
def test_checkpoint_reference_from_any_text(url: str) -> None:
    try:
        sha = sha_from_url(url)
    except VerificationError:
        return
    assert len(sha) == 64 and set(sha) <= set(HEX)


_CONFIG = StateConfig(with_vocab(get_preset("tiny"), 64), InnerOptimSpec())
_CHECKPOINT = encode_checkpoint(init_state(_CONFIG, 1))


def test_checkpoint_size_is_exact() -> None:
    assert checkpoint_size(_CONFIG) == len(_CHECKPOINT)


@FUZZ
@given(
    st.lists(st.tuples(st.integers(0, len(_CHECKPOINT) - 1), st.integers(0, 255)), max_size=4),
    st.integers(0, len(_CHECKPOINT)),
    st.binary(max_size=16),
)
@example([(20, 0xFF)], len(_CHECKPOINT), b"")  # config digest
@example([], 100, b"")  # truncated inside a tensor header
@example([], len(_CHECKPOINT), b"\x00")  # trailing byte
def test_checkpoint_from_mutated_bytes(flips: list[tuple[int, int]], cut: int, tail: bytes) -> None:
    data = bytearray(_CHECKPOINT[:cut] + tail)
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    try:
        state = decode_checkpoint(bytes(data), _CONFIG)
    except CheckpointError:
        return
    assert bytes(data) == _CHECKPOINT or encode_checkpoint(state) == bytes(data)


_RUN = RunManifest.model_validate(manifest_doc())
_ISLAND = Hotkey.from_seed(b"\x31" * 32)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "round",
                "checkpoint_root",
                "leaf_count",
                "update_sha256",
                "update_bytes",
                "tokens",
                "update_url",
                "checkpoint_url",
                "train_loss",
            ]
        ),
        json_values,
    )
)
def test_commit_body_from_any_fields(body: dict[str, Any]) -> None:
    try:
        env = seal(_ISLAND, domain="commit", run_id="run-1", body=body, expiry_round=10**9)
    except ValueError:
        return  # not even sealable (non-finite numbers, out-of-range integers)
    try:
        verify_commit(env.model_dump(mode="json"), _RUN, _ISLAND.ss58_address, 0)
    except IslandInputError:
        return
    raise AssertionError("an arbitrary body verified as a commit")
