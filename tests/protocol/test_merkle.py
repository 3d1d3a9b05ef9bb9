from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypertrain.protocol import domains
from hypertrain.protocol.errors import MerkleError
from hypertrain.protocol.merkle import (
    EMPTY_ROOT,
    MerkleProof,
    MerkleTree,
    leaf_hash,
    merkle_root,
    node_hash,
    verify_proof,
)


def rfc6962_root(leaves: list[bytes]) -> bytes:
    """The recursive RFC 6962 definition, as an independent oracle."""
    if not leaves:
        return EMPTY_ROOT
    if len(leaves) == 1:
        return leaf_hash(leaves[0])
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return node_hash(rfc6962_root(leaves[:k]), rfc6962_root(leaves[k:]))


def leaves_of(n: int) -> list[bytes]:
    return [i.to_bytes(4, "big") for i in range(n)]


def test_empty_single_and_two() -> None:
    assert merkle_root([]) == domains.tagged_hash(domains.MERKLE_EMPTY, b"")
    assert merkle_root([b"a"]) == hashlib.sha256(b"hypertrain/v1/merkle-leaf\x00a").digest()
    expected = hashlib.sha256(
        b"hypertrain/v1/merkle-node\x00" + leaf_hash(b"a") + leaf_hash(b"b")
    ).digest()
    assert merkle_root([b"a", b"b"]) == expected


@pytest.mark.parametrize("n", [*range(18), 31, 33, 100, 1000])
def test_matches_rfc6962_shape(n: int) -> None:
    assert merkle_root(leaves_of(n)) == rfc6962_root(leaves_of(n))


def test_leaf_cannot_pass_for_node() -> None:
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    # A "leaf" whose data is the concatenation of two child hashes does not give the parent.
    assert leaf_hash(a + b) != node_hash(a, b)


def test_odd_last_node_is_not_duplicated() -> None:
    assert merkle_root(leaves_of(3)) != merkle_root([*leaves_of(3), leaves_of(3)[-1]])


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=70), st.data())
def test_every_leaf_proves_and_tampering_fails(n: int, data: st.DataObject) -> None:
    leaves = leaves_of(n)
    tree = MerkleTree.from_leaves(leaves)
    for i, leaf in enumerate(leaves):
        proof = tree.proof(i)
        verify_proof(tree.root, leaf, proof)
        assert MerkleProof.from_json(proof.to_json()) == proof
    i = data.draw(st.integers(min_value=0, max_value=n - 1))
    proof = tree.proof(i)
    with pytest.raises(MerkleError):
        verify_proof(tree.root, leaves[i] + b"x", proof)
    if proof.siblings:
        j = data.draw(st.integers(min_value=0, max_value=len(proof.siblings) - 1))
        bit = data.draw(st.integers(min_value=0, max_value=255))
        sib = bytearray(proof.siblings[j])
        sib[bit // 8] ^= 1 << (bit % 8)
        bad = MerkleProof(i, n, (*proof.siblings[:j], bytes(sib), *proof.siblings[j + 1 :]))
        with pytest.raises(MerkleError):
            verify_proof(tree.root, leaves[i], bad)
    if n > 1:
        other = (i + 1) % n
        with pytest.raises(MerkleError):
            verify_proof(tree.root, leaves[i], MerkleProof(other, n, proof.siblings))


def test_malformed_proofs_refused() -> None:
    tree = MerkleTree.from_leaves(leaves_of(5))
    proof = tree.proof(2)
    root = tree.root
    cases = [
        MerkleProof(2, 5, proof.siblings[:-1]),  # truncated
        MerkleProof(2, 5, (*proof.siblings, b"\x00" * 32)),  # too long
        MerkleProof(7, 5, proof.siblings),  # index out of range
        MerkleProof(2, 5, (proof.siblings[0][:31], *proof.siblings[1:])),  # short digest
        MerkleProof(2, 3, proof.siblings),  # wrong leaf count (fewer levels)
    ]
    for bad in cases:
        with pytest.raises(MerkleError):
            verify_proof(root, leaves_of(5)[2], bad)
    # A proof for the wrong root.
    with pytest.raises(MerkleError, match="does not lead"):
        verify_proof(merkle_root(leaves_of(6)), leaves_of(5)[2], proof)


@pytest.mark.parametrize(
    "doc",
    [
        None,
        [],
        {"index": 0, "leaf_count": 1},
        {"index": -1, "leaf_count": 1, "siblings": []},
        {"index": True, "leaf_count": 1, "siblings": []},
        {"index": 0, "leaf_count": 2, "siblings": ["zz" * 32]},
        {"index": 0, "leaf_count": 2, "siblings": ["ab"]},
        {"index": 0, "leaf_count": 2, "siblings": "ab"},
        {"index": 0, "leaf_count": 2, "siblings": ["00" * 32] * 65},
        {"index": 0, "leaf_count": 2, "siblings": [], "extra": 1},
    ],
)
def test_proof_json_decoder_refuses(doc: object) -> None:
    with pytest.raises(MerkleError):
        MerkleProof.from_json(doc)


def test_from_leaf_hashes_matches_and_checks_length() -> None:
    leaves = leaves_of(9)
    hashes = [leaf_hash(x) for x in leaves]
    assert MerkleTree.from_leaf_hashes(hashes).root == merkle_root(leaves)
    assert MerkleTree.from_leaf_hashes(b"".join(hashes)).root == merkle_root(leaves)
    with pytest.raises(MerkleError):
        MerkleTree.from_leaf_hashes(b"\x00" * 33)
    with pytest.raises(MerkleError):
        MerkleTree.from_leaves(leaves).proof(9)


def test_parallel_build_is_byte_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    import hypertrain.protocol.merkle as merkle

    monkeypatch.setattr(merkle, "PARALLEL_MIN_DIGESTS", 8)
    leaves = leaves_of(1001)
    single = MerkleTree.from_leaves(leaves)
    parallel = MerkleTree.from_leaves(leaves, workers=2)
    assert parallel.root == single.root == rfc6962_root(leaves)
    assert parallel.proof(999) == single.proof(999)
    hashes = b"".join(leaf_hash(x) for x in leaves)
    assert MerkleTree.from_leaf_hashes(hashes, workers=3).root == single.root


def test_accelerator_matches_pure_python() -> None:
    import os

    import hypertrain.protocol.merkle as merkle

    if merkle._merkle_c is None:
        pytest.skip("the optional C accelerator was not built here")
    leaves = [os.urandom(n % 70) for n in range(517)]
    assert merkle._hash_leaves(leaves) == merkle._hash_leaves_py(leaves)
    level = os.urandom(64 * 33)
    assert merkle._hash_pairs(level) == merkle._hash_pairs_py(level)
    with pytest.raises(TypeError):
        merkle._merkle_c.hash_leaves(b"p", [b"ok", "not bytes"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        merkle._merkle_c.hash_pairs(b"p", b"x" * 65)
