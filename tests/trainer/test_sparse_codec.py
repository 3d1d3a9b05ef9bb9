"""Sparse low-bit codec: round trip, tie-breaking, exact norm, malformed blobs refused."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
import torch

from hypertrain.aggregator.errors import UpdateFormatError
from hypertrain.aggregator.norms import update_norm
from hypertrain.protocol.manifest import CompressionSpec, SparseSpec
from hypertrain.trainer.codec import encode_int8
from hypertrain.trainer.errors import CodecError
from hypertrain.trainer.sparse_codec import (
    HEADER,
    SparseCodecError,
    SparseParams,
    decode_sparse,
    encode_sparse,
    pack_bits,
    parse_sparse_header,
    unpack_bits,
)
from hypertrain.trainer.update import decode_update, encode_update

P = SparseParams(chunk_size=64, k=8, bits=2)


def _tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"a.weight": torch.randn(10, 13, generator=g), "b": torch.randn(70, generator=g)}


def test_round_trip_keeps_top_k_and_bounds_the_error() -> None:
    x = _tensors()
    out = decode_sparse(encode_sparse(x, P))
    assert list(out) == list(x)
    for name, t in x.items():
        flat, dec = t.reshape(-1), out[name].reshape(-1)
        for start in range(0, flat.numel(), P.chunk_size):
            chunk, got = flat[start : start + P.chunk_size], dec[start : start + P.chunk_size]
            kept = got != 0
            assert int(kept.sum()) == min(P.k, chunk.numel())
            # kept entries are the largest magnitudes, and each is within half a step
            rest = chunk.abs()[~kept]
            assert not rest.numel() or chunk.abs()[kept].min() >= rest.max()
            absmax = float(chunk.abs()[kept].max())
            step = absmax / (P.levels // 2)
            assert float((chunk[kept] - got[kept]).abs().max()) <= step / 2 + 1e-6
            assert bool((torch.sign(chunk[kept]) == torch.sign(got[kept])).all())


@pytest.mark.parametrize("bits", [2, 3, 4])
def test_more_bits_less_error(bits: int) -> None:
    x = {"w": torch.randn(4096, generator=torch.Generator().manual_seed(1))}
    p = SparseParams(512, 512, bits)  # keep everything: only quantisation error remains
    err = float((decode_sparse(encode_sparse(x, p))["w"] - x["w"]).norm() / x["w"].norm())
    assert err < {2: 0.5, 3: 0.25, 4: 0.14}[bits]


def test_ties_go_to_the_lower_index() -> None:
    x = {"w": torch.tensor([1.0, -2.0, 2.0, 0.5, -2.0, 2.0, 1.0, 0.0])}
    p = SparseParams(chunk_size=8, k=3, bits=2)
    dec = decode_sparse(encode_sparse(x, p))["w"]
    assert (dec != 0).nonzero().reshape(-1).tolist() == [1, 2, 4]
    # -0.0 and 0.0 tie too: an all-zero chunk keeps its first k offsets
    z = {"w": torch.tensor([0.0, -0.0, 0.0, 0.0])}
    data = encode_sparse(z, SparseParams(4, 2, 2))
    assert data == encode_sparse({"w": torch.zeros(4)}, SparseParams(4, 2, 2))
    assert torch.equal(decode_sparse(data)["w"], torch.zeros(4))


def test_encoding_is_deterministic_and_short_last_chunk() -> None:
    x = {"w": torch.randn(130, generator=torch.Generator().manual_seed(3))}
    a, b = encode_sparse(x, P), encode_sparse({"w": x["w"].clone()}, P)
    assert a == b
    _, metas, _ = parse_sparse_header(a)
    assert metas[0].num_kept(P) == 2 * 8 + 2  # last chunk holds only 2 elements


def test_pack_bits_round_trip() -> None:
    values = np.array([0, 1, 4095, 17, 2048], dtype=np.int64)
    packed = pack_bits(values, 12)
    assert len(packed) == math.ceil(5 * 12 / 8)
    assert unpack_bits(memoryview(packed), 5, 12).tolist() == values.tolist()


def test_exact_norm_matches_the_decoded_tensors() -> None:
    x = _tensors(4)
    spec = CompressionSpec(error_feedback=True, sparse=SparseSpec(chunk_size=64, topk_per_chunk=8))
    data = encode_update(x, spec)
    shapes = [(k, tuple(v.shape)) for k, v in x.items()]
    ref = math.sqrt(sum(float(t.double().pow(2).sum()) for t in decode_update(data, spec).values()))
    assert update_norm(data, shapes, spec) == pytest.approx(ref, rel=1e-6)
    with pytest.raises(UpdateFormatError) as wrong:  # an int8 update in a sparse run
        update_norm(encode_int8(x, 16), shapes, spec)
    assert wrong.value.reason == "malformed"
    with pytest.raises(UpdateFormatError) as bad:  # other chunk parameters than the run's
        update_norm(encode_sparse(x, SparseParams(64, 4, 2)), shapes, spec)
    assert bad.value.reason == "malformed"
    with pytest.raises(CodecError, match="codec"):
        decode_update(data, CompressionSpec())


def test_manifest_sparse_section_is_optional_and_checked() -> None:
    assert "sparse" not in CompressionSpec().model_dump(mode="json")
    assert CompressionSpec().codec == "int8"
    with pytest.raises(ValueError, match="error_feedback"):
        CompressionSpec(sparse=SparseSpec())
    with pytest.raises(ValueError, match="topk_per_chunk"):
        SparseSpec(chunk_size=8, topk_per_chunk=9)


def _encoded() -> bytes:
    return encode_sparse({"w": torch.randn(100, generator=torch.Generator().manual_seed(5))}, P)


def test_wrong_length_is_refused() -> None:
    data = _encoded()
    for bad in (data[:-1], data + b"\0", data[:5]):
        with pytest.raises(SparseCodecError, match=r"bytes|truncated"):
            decode_sparse(bad)


def test_bad_header_is_refused() -> None:
    data = _encoded()
    magic, version, chunk, k, bits, count = HEADER.unpack_from(data)
    cases = [
        HEADER.pack(b"HTQ8", version, chunk, k, bits, count),
        HEADER.pack(magic, 2, chunk, k, bits, count),
        HEADER.pack(magic, version, chunk, chunk + 1, bits, count),
        HEADER.pack(magic, version, chunk, k, 5, count),
        HEADER.pack(magic, version, 0, k, bits, count),
    ]
    for header in cases:
        with pytest.raises(SparseCodecError):
            decode_sparse(header + data[HEADER.size :])
    with pytest.raises(SparseCodecError, match="demands"):
        decode_sparse(data, params=SparseParams(64, 4, 2))
    with pytest.raises(SparseCodecError, match="names and shapes"):
        decode_sparse(data, expected=[("w", (10, 10))])


def _body_offsets(data: bytes) -> tuple[int, int]:
    """(offset of the index stream, offset of the code stream) of the single tensor."""
    _, metas, pos = parse_sparse_header(data)
    idx_start = pos + 4 * metas[0].num_chunks(P)
    return idx_start, idx_start + math.ceil(metas[0].num_kept(P) * P.index_bits / 8)


def _with_indices(data: bytes, indices: list[int]) -> bytes:
    start, end = _body_offsets(data)
    packed = pack_bits(np.array(indices, dtype=np.int64), P.index_bits)
    assert len(packed) == end - start
    return data[:start] + packed + data[end:]


def test_index_out_of_range_is_refused() -> None:
    data = _encoded()
    start, end = _body_offsets(data)
    idx = unpack_bits(memoryview(data[start:end]), 16, P.index_bits).tolist()
    idx[-1] = 63  # the last chunk has only 36 elements
    with pytest.raises(SparseCodecError, match="outside"):
        decode_sparse(_with_indices(data, idx))


def test_unordered_or_repeated_indices_are_refused() -> None:
    data = _encoded()
    start, end = _body_offsets(data)
    idx = unpack_bits(memoryview(data[start:end]), 16, P.index_bits).tolist()
    for bad in ([idx[1], idx[0], *idx[2:]], [idx[0], idx[0], *idx[2:]]):
        with pytest.raises(SparseCodecError, match="ascending"):
            decode_sparse(_with_indices(data, bad))


def test_non_finite_or_negative_scale_is_refused() -> None:
    data = _encoded()
    _, _, pos = parse_sparse_header(data)
    for value in (float("nan"), float("inf"), -1.0):
        bad = data[:pos] + struct.pack("<f", value) + data[pos + 4 :]
        with pytest.raises(SparseCodecError, match="scale"):
            decode_sparse(bad)


def test_non_finite_input_is_refused() -> None:
    with pytest.raises(SparseCodecError, match="NaN"):
        encode_sparse({"w": torch.tensor([1.0, float("nan")])}, P)


def test_only_the_encoders_chunks_decode() -> None:
    """Two byte strings never decode to the same values: a zero chunk keeps its first
    entries with the zero code, any other chunk a code at an end of the range and a
    normal scale (the encoder sends a chunk whose scale would be subnormal as zeros)."""
    p = SparseParams(chunk_size=4, k=2, bits=2)
    data = encode_sparse({"w": torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 3.0, -1.0, 0.5])}, p)
    _, _, pos = parse_sparse_header(data)

    def body(scales: list[float], offsets: list[int], codes: list[int]) -> bytes:
        return (
            data[:pos]
            + struct.pack("<2f", *scales)
            + pack_bits(np.array(offsets), p.index_bits)
            + pack_bits(np.array(codes), p.bits)
        )

    assert body([0.0, 1.5], [0, 1, 1, 2], [2, 2, 3, 1]) == data
    canonical = body([0.0, 0.5], [0, 1, 1, 2], [2, 2, 0, 3])  # -0.75 and 0.75
    assert decode_sparse(canonical)["w"].tolist() == [0, 0, 0, 0, 0, -0.75, 0.75, 0]
    for bad, why in [
        (body([0.0, 1.5], [0, 1, 1, 2], [1, 2, 3, 1]), "scale 0 is not the zero chunk"),
        (body([0.0, 1.5], [1, 2, 1, 2], [2, 2, 3, 1]), "scale 0 is not the zero chunk"),
        (body([0.0, 1e-40], [0, 1, 1, 2], [2, 2, 3, 1]), "subnormal scale"),
        (body([0.0, 1.5], [0, 1, 1, 2], [2, 2, 1, 2]), "no code at an end"),  # as canonical
    ]:
        with pytest.raises(SparseCodecError, match=why):
            decode_sparse(bad)
    tiny = encode_sparse({"w": torch.tensor([1e-39, 0.0, 0.0, 0.0])}, p)
    assert tiny == encode_sparse({"w": torch.zeros(4)}, p)
