"""The canonical Huffman coder and the entropy-coded blockwise formats (HTE4, HTE2)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from hypertrain.trainer import entropy
from hypertrain.trainer.codec import (
    check_format,
    code_format,
    decode_quantized,
    encode_quantized,
    iter_blocks,
)
from hypertrain.trainer.errors import CodecError


def _symbols(n: int, alphabet: int, seed: int = 0) -> np.ndarray:
    """Gaussian-shaped codes around the middle, as a pseudo-gradient's are."""
    rng = np.random.default_rng(seed)
    middle = (alphabet - 1) / 2
    values = np.round(rng.normal(middle, max(alphabet / 6, 0.4), n))
    return np.clip(values, 0, alphabet - 1).astype(np.int64)


@pytest.mark.parametrize(
    ("alphabet", "n"),
    [(15, 10_000), (15, entropy.CHUNK), (15, entropy.CHUNK + 1), (3, 9_000), (15, 1), (3, 2)],
)
def test_symbols_round_trip(alphabet: int, n: int) -> None:
    symbols = _symbols(n, alphabet)
    data = entropy.encode(symbols, alphabet)
    assert np.array_equal(entropy.decode(memoryview(data), n, alphabet), symbols)
    assert entropy.stream_size(memoryview(data), n, alphabet) == len(data)


def test_no_symbols_encode_to_the_empty_table() -> None:
    data = entropy.encode(np.zeros(0, dtype=np.int64), 15)
    assert data == bytes(15)
    assert entropy.decode(memoryview(data), 0, 15).size == 0
    with pytest.raises(CodecError, match="no symbols carry a code"):
        entropy.decode(memoryview(bytes([1]) + bytes(14)), 0, 15)


def test_codes_take_about_the_entropy() -> None:
    symbols = _symbols(100_000, 15)
    p = np.bincount(symbols, minlength=15) / symbols.size
    bits = -(p[p > 0] * np.log2(p[p > 0])).sum()
    per_symbol = 8 * len(entropy.encode(symbols, 15)) / symbols.size
    assert bits <= per_symbol < bits + 0.1  # Huffman: within a tenth of a bit here


def test_huffman_lengths_follow_the_counts() -> None:
    assert entropy.code_lengths(np.array([0, 5, 0])) == [0, 1, 0]
    assert entropy.code_lengths(np.array([1, 1, 2])) == [2, 2, 1]
    assert entropy.code_lengths(np.array([8, 4, 2, 1, 1])) == [1, 2, 3, 4, 4]


def test_every_accepted_mutation_is_canonical() -> None:
    """A flipped bit either is refused or decodes to symbols whose encoding is exactly the
    mutated bytes: no two byte strings carry the same symbols."""
    rng = np.random.default_rng(1)
    for alphabet in (15, 3):
        symbols = _symbols(2 * entropy.CHUNK + 7, alphabet, seed=alphabet)
        data = entropy.encode(symbols, alphabet)
        for _ in range(300):
            mutated = bytearray(data)
            mutated[rng.integers(len(mutated))] ^= 1 << int(rng.integers(8))
            try:
                found = entropy.decode(memoryview(bytes(mutated)), symbols.size, alphabet)
            except CodecError:
                continue
            assert entropy.encode(found, alphabet) == bytes(mutated)


def _parts(data: bytes, alphabet: int, n: int) -> tuple[list[int], list[int], bytes]:
    chunks = -(-n // entropy.CHUNK)
    head = alphabet + 2 * chunks
    sizes = list(struct.unpack(f"<{chunks}H", data[alphabet:head]))
    return list(data[:alphabet]), sizes, data[head:]


def _join(lengths: list[int], sizes: list[int], stream: bytes) -> memoryview:
    return memoryview(bytes(lengths) + struct.pack(f"<{len(sizes)}H", *sizes) + stream)


def test_malformed_streams_are_refused() -> None:
    symbols = _symbols(entropy.CHUNK + 100, 15)
    n, data = symbols.size, entropy.encode(symbols, 15)
    lengths, sizes, stream = _parts(data, 15, n)
    cases = {
        "wrong length": memoryview(data + b"\0"),
        "truncated": memoryview(data[:16]),
        "longer than any Huffman": _join([15, *lengths[1:]], sizes, stream),
        "do not form a prefix code": _join([1, 1, 1, *lengths[3:]], sizes, stream),
    }
    for message, raw in cases.items():
        with pytest.raises(CodecError, match=message):
            entropy.decode(raw, n, 15)
    # A chunk declared longer or shorter than its codes, with the total kept.
    with pytest.raises(CodecError, match="does not end where its length says"):
        entropy.decode(_join(lengths, [sizes[0] + 1, sizes[1] - 1], stream), n, 15)
    # Lengths that are a valid prefix code, but not the symbols' Huffman lengths.
    flat = [4 if length else 0 for length in lengths]
    assert flat != lengths
    with pytest.raises(CodecError):
        entropy.decode(_join(flat, sizes, stream), n, 15)
    # A set padding bit.
    pad = (-sum(sizes)) % 8
    assert pad, "the fixture's stream must end inside a byte"
    tail = stream[:-1] + bytes([stream[-1] | 0x80])
    with pytest.raises(CodecError, match="padding bits"):
        entropy.decode(_join(lengths, sizes, tail), n, 15)


def test_a_bit_pattern_that_is_no_code_is_refused() -> None:
    data = entropy.encode(np.full(10, 4, dtype=np.int64), 15)  # one symbol: the code 0
    raw = bytearray(data)
    raw[-1] |= 1  # the first code becomes 1, which is no code
    with pytest.raises(CodecError, match="no code"):
        entropy.decode(memoryview(bytes(raw)), 10, 15)


def test_alphabets_the_decoder_cannot_table_are_refused() -> None:
    with pytest.raises(CodecError, match="alphabets of 1 to 16"):
        entropy.encode(np.zeros(3, dtype=np.int64), 255)
    with pytest.raises(CodecError, match="outside"):
        entropy.encode(np.array([15]), 15)


def _update() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    return {
        "w": torch.randn(300, 41, generator=gen),
        "b": torch.randn(7, generator=gen),
        "zero": torch.zeros(64),
    }


@pytest.mark.parametrize("bits", [4, 2])
def test_entropy_coded_updates_decode_to_the_plain_format(bits: int) -> None:
    tensors = _update()
    plain = encode_quantized(tensors, 64, bits)
    coded = encode_quantized(tensors, 64, bits, entropy=True)
    assert code_format(coded) == (bits, True) and code_format(plain) == (bits, False)
    assert len(coded) < len(plain)
    for (a, sa, ca), (b, sb, cb) in zip(iter_blocks(plain), iter_blocks(coded), strict=True):
        assert a == b and np.array_equal(sa, sb) and np.array_equal(ca, cb)
    ours, theirs = decode_quantized(coded), decode_quantized(plain)
    assert all(torch.equal(ours[k], theirs[k]) for k in tensors)
    check_format(coded, bits, True)
    with pytest.raises(CodecError, match="codes entropy coded, the run's are not"):
        check_format(coded, bits, False)


def test_a_read_again_shares_read_only_codes_and_a_refusal_repeats() -> None:
    coded = encode_quantized(_update(), 64, 4, entropy=True)
    first = [codes for _, _, codes in iter_blocks(coded)]
    again = [codes for _, _, codes in iter_blocks(bytes(coded))]
    assert len(first) == len(again) == 3
    assert all(
        np.array_equal(a, b) and not b.flags.writeable for a, b in zip(first, again, strict=True)
    )
    with pytest.raises(ValueError, match="read-only"):
        again[0][0] = 1
    broken = bytearray(coded)
    broken[-1] ^= 0x80  # a set padding bit or a stream that no longer ends where it says
    for _ in range(2):  # a refused section is not remembered as decoded
        with pytest.raises(CodecError):
            list(iter_blocks(bytes(broken)))


def test_entropy_coded_containers_refuse_bad_lengths_and_widths() -> None:
    coded = encode_quantized(_update(), 64, 4, entropy=True)
    with pytest.raises(CodecError, match=r"header implies|truncated"):
        decode_quantized(coded[:-1])
    with pytest.raises(CodecError, match="header implies"):
        decode_quantized(coded + b"\0")
    with pytest.raises(CodecError, match="entropy-coded codes are 4 or 2 bits wide"):
        encode_quantized(_update(), 64, 8, entropy=True)


def test_manifests_take_entropy_coding_only_where_it_is_defined() -> None:
    from pydantic import ValidationError

    from hypertrain.protocol.manifest import CompressionSpec, RunManifest
    from tests.aggregator.helpers import manifest

    assert CompressionSpec(bits=4, entropy=True).model_dump(mode="json")["entropy"] is True
    assert "entropy" not in CompressionSpec(bits=4).model_dump(mode="json")  # old hashes kept
    with pytest.raises(ValidationError, match="4- and 2-bit"):
        CompressionSpec(entropy=True)  # 8-bit codes
    with pytest.raises(ValidationError, match="4- and 2-bit"):
        CompressionSpec(entropy=True, error_feedback=True, sparse={"topk_per_chunk": 8})
    doc = manifest(broadcast="int8").model_dump(mode="json")
    doc["compression"] |= {"bits": 4, "entropy": True}
    with pytest.raises(ValidationError, match=r"set outer\.broadcast to int4 or int2"):
        RunManifest.model_validate(doc)


def test_a_stream_too_short_for_its_count_is_refused_before_decoding() -> None:
    """A decoding bomb: a small blob claiming many symbols is refused from its tables."""
    n = 1 << 22
    chunks = -(-n // entropy.CHUNK)
    lengths = [0] * 7 + [1, 1] + [0] * 6
    bomb = bytes(lengths) + bytes(2 * chunks)  # every chunk claims 0 bits
    with pytest.raises(CodecError, match="does not fit its symbols' codes"):
        entropy.decode(memoryview(bomb), n, 15)
    greedy = bytes(lengths) + struct.pack(f"<{chunks}H", *[2 * entropy.CHUNK] * chunks)
    greedy += bytes(2 * entropy.CHUNK * chunks // 8)  # two bits a symbol from 1-bit codes
    with pytest.raises(CodecError, match="does not fit its symbols' codes"):
        entropy.decode(memoryview(greedy), n, 15)
