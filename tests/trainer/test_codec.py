from __future__ import annotations

import struct
from dataclasses import replace

import numpy as np
import pytest
import torch

from hypertrain.protocol.manifest import CompressionSpec
from hypertrain.trainer import entropy as coder
from hypertrain.trainer.codec import (
    HEADER,
    MAGICS,
    code_bits,
    decode_int8,
    decode_quantized,
    encode_int8,
    encode_quantized,
    iter_decode,
    levels,
    parse_header,
    quantize,
    relative_l2,
    update_hash,
)
from hypertrain.trainer.errors import CodecError
from hypertrain.trainer.segment import run_round
from hypertrain.trainer.state import RESIDUAL_PREFIX, init_state
from hypertrain.trainer.update import (
    build_update,
    iter_decode_update,
    next_round_state,
    pseudo_gradient,
)
from tests.trainer.conftest import make_config, make_samples


def _tensors(seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "a.weight": torch.randn(37, 11, generator=gen) * 1e-3,
        "b.weight": torch.randn(300, generator=gen),
        "zeros": torch.zeros(5, 4),
    }


def test_round_trip_error_is_bounded_and_deterministic() -> None:
    x = _tensors()
    data = encode_int8(x, 64)
    assert data == encode_int8(_tensors(), 64)
    assert update_hash(data) == update_hash(encode_int8(_tensors(), 64))
    y = decode_int8(data, [(k, tuple(v.shape)) for k, v in x.items()])
    assert list(y) == list(x)
    for name, t in x.items():
        scales, _ = quantize(t, 64)
        per_elem = scales.repeat_interleave(64)[: t.numel()].reshape(t.shape)
        assert bool(((t - y[name]).abs() <= per_elem / 2 + 1e-12).all())
    assert torch.equal(y["zeros"], x["zeros"])
    err = relative_l2(x, y)
    assert 0 < err < 0.01
    n = sum(t.numel() for t in x.values())
    assert len(data) < 1.1 * n + 100  # ~1 byte per element plus scales


def test_rounding_matches_numpy_reference() -> None:
    t = torch.tensor([1.0, -0.5, 0.25, 127.0, -127.0, 63.5, 0.0, 2.0])
    scales, q = quantize(t, 8)
    assert float(scales[0]) == pytest.approx(1.0)
    np.testing.assert_array_equal(q.numpy(), np.round(t.numpy() / 1.0).astype(np.int8))


def test_streaming_decode_yields_per_tensor() -> None:
    x = _tensors()
    names = [name for name, _ in iter_decode(encode_int8(x, 16))]
    assert names == list(x)
    block, metas, _ = parse_header(encode_int8(x, 16))
    assert block == 16 and [m.shape for m in metas] == [tuple(v.shape) for v in x.values()]


def test_wrong_length_is_refused() -> None:
    data = encode_int8(_tensors(), 32)
    for bad in (data[:-1], data + b"\x00", data[:3], b""):
        with pytest.raises(CodecError, match=r"bytes|truncated"):
            decode_int8(bad)


def test_bad_header_is_refused() -> None:
    data = bytearray(encode_int8(_tensors(), 32))
    with pytest.raises(CodecError, match="magic"):
        decode_int8(b"XXXX" + bytes(data[4:]))
    zero_block = bytearray(data)
    struct.pack_into("<I", zero_block, 6, 0)
    with pytest.raises(CodecError, match="block size"):
        decode_int8(bytes(zero_block))
    bad_dtype = bytearray(data)
    name_len = struct.unpack_from("<H", data, HEADER.size)[0]
    bad_dtype[HEADER.size + 2 + name_len] = 9
    with pytest.raises(CodecError, match="dtype"):
        decode_int8(bytes(bad_dtype))
    with pytest.raises(CodecError, match="names and shapes"):
        decode_int8(bytes(data), [("a.weight", (11, 37))])


def test_non_finite_scale_is_refused() -> None:
    x = {"w": torch.ones(64)}
    data = bytearray(encode_int8(x, 32))
    _, _, body = parse_header(bytes(data))
    for bad in (float("nan"), float("inf"), -1.0):
        corrupt = bytearray(data)
        struct.pack_into("<f", corrupt, body, bad)
        with pytest.raises(CodecError, match="scale"):
            decode_int8(bytes(corrupt))
    corrupt = bytearray(data)
    corrupt[body + 8] = 0x80  # int8 -128
    with pytest.raises(CodecError, match="-128"):
        decode_int8(bytes(corrupt))


@pytest.mark.parametrize("entropy", [False, True])
def test_only_the_encoders_blocks_decode(entropy: bool) -> None:
    """Two byte strings never decode to the same values: a zero block carries zero codes,
    a non-zero block its absmax code and a normal scale (the encoder flushes scales that
    would be subnormal to 0)."""
    x = {"w": torch.tensor([4.0, 0.0, 0.0, 0.0, 0.5, -1.0, 0.25, 2.0])}
    assert quantize(torch.full((4,), 1e-40), 4, 4)[0].tolist() == [0.0]
    scales, q = quantize(x["w"], 4, 4)
    q = q.clone()

    def encoded(s: torch.Tensor, codes: torch.Tensor) -> bytes:
        data = bytearray(encode_quantized(x, 4, 4, entropy))
        _, _, body = parse_header(bytes(data))
        struct.pack_into("<2f", data, body, *s.tolist())
        if entropy:  # the codes change the entropy section: re-encode it around them
            return _with_codes(bytes(data), codes)
        packed = ((codes.to(torch.int16) + 7).numpy().astype(np.uint8)).reshape(-1, 2)
        data[body + 8 : body + 12] = bytes(packed[:, 0] | packed[:, 1] << 4)
        return bytes(data)

    assert encoded(scales, q) == encode_quantized(x, 4, 4, entropy)
    zero_block = torch.tensor([0.0, scales[1].item()])
    ones = torch.tensor([0, 1, 0, 0, 1, -1, 0, 2], dtype=torch.int8)
    # codes (1, -2, 0, 3) at scale s decode as (2, -4, 0, 6) at s / 2 do: neither is written
    low = torch.tensor([7, 0, 0, 0, 1, -2, 0, 3], dtype=torch.int8)
    for s, codes, why in [
        (zero_block, ones, "scale 0 carries non-zero codes"),
        (torch.tensor([1e-40, scales[1].item()]), q, "subnormal scale"),
        (scales, low, "largest code is not 7"),
        (
            scales / torch.tensor([1.0, 2.0]),
            low * torch.tensor([1, 1, 1, 1, 2, 2, 2, 2], dtype=torch.int8),
            "largest code is not 7",
        ),
    ]:
        with pytest.raises(CodecError, match=why):
            decode_quantized(encoded(s, codes))


def _with_codes(data: bytes, codes: torch.Tensor) -> bytes:
    """``data`` (one tensor, HTE4) with its entropy section re-encoded for ``codes``."""
    _, metas, body = parse_header(data)
    section = body + metas[0].scale_bytes(4)
    return data[:section] + coder.encode((codes.to(torch.int64) + 7).numpy(), 15)


def test_non_finite_input_is_refused() -> None:
    with pytest.raises(CodecError, match="NaN"):
        encode_int8({"w": torch.tensor([1.0, float("nan")])}, 8)


def test_update_from_a_round() -> None:
    cfg = make_config(steps=2, interval=1)
    start = init_state(cfg.state_config(), 0)
    result = run_round(start, cfg, make_samples(8))
    update = build_update(start.params(), result.final, cfg.compression)
    delta = pseudo_gradient(start.params(), result.final.params())
    decoded = decode_int8(update.data)
    assert update.relative_l2_error == pytest.approx(relative_l2(delta, decoded))
    assert update.relative_l2_error < 0.05
    assert update.residual is None and update.ratio_vs_fp32 < 0.27
    assert update.digest == build_update(start.params(), result.final, cfg.compression).digest


def test_error_feedback_carries_the_residual_into_the_next_round() -> None:
    cfg = replace(
        make_config(steps=2, interval=1),
        compression=CompressionSpec(block_size=64, error_feedback=True),
    )
    start = init_state(cfg.state_config(), 0)
    assert all(not bool(v.any()) for k, v in start.tensors.items() if k.startswith(RESIDUAL_PREFIX))
    end = run_round(start, cfg, make_samples(8)).final
    update = build_update(start.params(), end, cfg.compression)
    assert update.residual is not None
    decoded = decode_int8(update.data)
    delta = pseudo_gradient(start.params(), end.params())
    for name, r in update.residual.items():
        torch.testing.assert_close(decoded[name] + r, delta[name], rtol=0, atol=1e-7)
    merged = {k: start.params()[k] - decoded[k] for k in decoded}
    nxt = next_round_state(end, merged, update.residual)
    assert torch.equal(nxt.tensors[RESIDUAL_PREFIX + "norm.weight"], update.residual["norm.weight"])
    assert nxt.state_hash() != next_round_state(end, merged, None).state_hash()
    second = run_round(nxt, cfg, make_samples(8, seed=1)).final
    again = build_update(nxt.params(), second, cfg.compression)
    plain = pseudo_gradient(nxt.params(), second.params())
    target = {k: plain[k] + update.residual[k] for k in plain}
    assert relative_l2(target, decode_int8(again.data)) == pytest.approx(again.relative_l2_error)


@pytest.mark.parametrize("bits", [4, 2])
def test_narrow_widths_round_trip_within_half_a_level(bits: int) -> None:
    x = _tensors(3)
    data = encode_quantized(x, 64, bits)
    assert data == encode_quantized(_tensors(3), 64, bits)  # canonical
    assert data[:4] == MAGICS[bits] and code_bits(data) == bits
    out = decode_quantized(data)
    top = levels(bits)
    for name, t in x.items():
        flat = t.reshape(-1)
        pad = -flat.numel() % 64
        absmax = torch.nn.functional.pad(flat.abs(), (0, pad)).view(-1, 64).amax(1)
        bound = (absmax / top / 2).repeat_interleave(64)[: flat.numel()] * (1 + 1e-6)
        assert bool(((out[name].reshape(-1) - flat).abs() <= bound + 1e-12).all())
    assert torch.equal(out["zeros"], torch.zeros(5, 4))
    metas = parse_header(data)[1]  # only the codes shrink: n * bits / 8 bytes, rounded up
    saved = sum(m.numel - -(-m.numel * bits // 8) for m in metas)
    assert len(encode_int8(x, 64)) - len(data) == saved


def test_four_bit_codes_pack_low_nibble_first() -> None:
    x = {"t": torch.tensor([7.0, -7.0, 0.0])}  # scale 1: codes 7, -7, 0 -> fields 14, 0, 7
    data = encode_quantized(x, 8, 4)
    body = data[-2:]  # 3 codes: two bytes, the last nibble of padding zero
    assert body == bytes([14 | (0 << 4), 7])
    assert torch.equal(decode_quantized(data)["t"], x["t"])


@pytest.mark.parametrize("bits", [4, 2])
def test_narrow_widths_refuse_unused_codes_and_padding(bits: int) -> None:
    x = {"t": torch.tensor([1.0, -1.0, 0.5])}
    data = bytearray(encode_quantized(x, 8, bits))
    unused = bytearray(data)
    unused[-1] |= (1 << bits) - 1  # the first field of the last byte: 2Q + 1
    with pytest.raises(CodecError, match="never occurs"):
        decode_quantized(bytes(unused))
    padded = bytearray(data)
    padded[-1] |= 1 << (8 - bits)  # the last field of the last byte is padding
    with pytest.raises(CodecError, match="padding bits"):
        decode_quantized(bytes(padded))


def test_widths_are_checked() -> None:
    x = _tensors()
    with pytest.raises(CodecError, match="8, 4 or 2"):
        encode_quantized(x, 64, 3)
    with pytest.raises(CodecError, match="not an int8 update"):
        decode_int8(encode_quantized(x, 64, 4))
    four = CompressionSpec(bits=4)
    with pytest.raises(CodecError, match="int4 codec"):
        list(iter_decode_update(encode_int8(x, 256), four))
    assert CompressionSpec().model_dump_json() == CompressionSpec(bits=8).model_dump_json()
    assert '"bits":4' in four.model_dump_json()  # the int8 manifests keep their hash
    with pytest.raises(ValueError, match="value_bits"):
        CompressionSpec(bits=4, error_feedback=True, sparse={"chunk_size": 64, "topk_per_chunk": 4})


def test_error_feedback_carries_the_narrow_codes_residual() -> None:
    cfg = replace(
        make_config(steps=2, interval=1),
        compression=CompressionSpec(block_size=64, error_feedback=True, bits=2),
    )
    start = init_state(cfg.state_config(), 0)
    end = run_round(start, cfg, make_samples(8)).final
    update = build_update(start.params(), end, cfg.compression)
    assert update.residual is not None and update.data[:4] == MAGICS[2]
    decoded = decode_quantized(update.data)
    delta = pseudo_gradient(start.params(), end.params())
    for name, r in update.residual.items():  # delta + old residual (zero) = decoded + new
        torch.testing.assert_close(decoded[name] + r, delta[name], rtol=0, atol=1e-7)
