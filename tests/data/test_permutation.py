"""The keyed Feistel permutation is a bijection of [0, n) for every n."""

from __future__ import annotations

import numpy as np
import pytest

from hypertrain.data.errors import AssignmentError
from hypertrain.data.permutation import Permutation
from hypertrain.data.stream_root import StreamingRoot
from hypertrain.protocol.merkle import MerkleTree

KEY = bytes(range(32))
PRIMES = [2, 3, 5, 7, 11, 13, 101, 997, 7919, 65537]


@pytest.mark.parametrize("n", [1, 4, 16, 17, 100, 255, 256, 1000, 4096, 100_003, *PRIMES])
def test_bijective(n: int) -> None:
    image = Permutation(KEY, n).range(0, n)
    assert np.array_equal(np.sort(image), np.arange(n, dtype=np.uint64))


def test_bijective_for_every_small_n() -> None:
    for n in range(1, 300):
        image = Permutation(KEY, n).range(0, n)
        assert len(set(image.tolist())) == n and int(image.max()) < n


def test_scalar_matches_array_and_is_deterministic() -> None:
    perm = Permutation(KEY, 10_007)
    arr = perm.map_array([0, 5, 10_006])
    assert [perm(0), perm(5), perm(10_006)] == arr.tolist()
    assert np.array_equal(Permutation(KEY, 10_007).range(0, 50), perm.range(0, 50))


def test_key_and_size_change_the_order() -> None:
    a = Permutation(KEY, 1000).range(0, 1000)
    b = Permutation(bytes(32), 1000).range(0, 1000)
    c = Permutation(KEY, 1001).range(0, 1000)
    assert not np.array_equal(a, b) and not np.array_equal(a, c)
    # a shuffle, not a near-identity: few fixed points
    assert int((a == np.arange(1000)).sum()) < 20


def test_large_domain_needs_no_materialised_array() -> None:
    perm = Permutation(KEY, 2**61 + 1)
    values = perm.map_array(np.arange(0, 1000, dtype=np.uint64) * np.uint64(2**50))
    assert len(set(values.tolist())) == 1000 and int(values.max()) <= 2**61


def test_bad_inputs() -> None:
    with pytest.raises(AssignmentError, match="32 bytes"):
        Permutation(b"short", 10)
    with pytest.raises(AssignmentError, match="domain size"):
        Permutation(KEY, 0)
    perm = Permutation(KEY, 10)
    with pytest.raises(AssignmentError, match="out of range"):
        perm(10)
    with pytest.raises(AssignmentError, match="out of range"):
        perm.map_array([3, 11])
    with pytest.raises(AssignmentError, match="not within"):
        perm.range(5, 11)


def test_streaming_root_equals_merkle_tree() -> None:
    for n in [*range(70), 127, 128, 129, 1000]:
        leaves = [n.to_bytes(4, "big") + i.to_bytes(4, "big") for i in range(n)]
        stream = StreamingRoot()
        for leaf in leaves:
            stream.add(leaf)
        assert stream.root == MerkleTree.from_leaves(leaves).root, n
        assert len(stream) == n
