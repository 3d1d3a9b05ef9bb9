"""The bfloat16 carried state without a network: rounding, widening, the reader, the
manifest field and the service's byte count (an attacker review; every defence here held).

* the rounding :func:`carried_of` applies is round-to-nearest-even on every finite float32
  bit pattern that rounds to a finite value (an integer-only reference), subnormals and
  negative zero included, whatever the tensor's strides, the thread count, the
  flush-denormal mode, and the portable and this machine's own ATen CPU kernel; a value that rounds
  to infinity or NaN is refused at the source (found by this review: it was stored, and
  no reader accepted the state); the widening is exact;
* the reader refuses every bfloat16 NaN/Inf pattern, the other width, a bfloat16
  residual and float16 slots, and keeps odd-but-finite patterns bit for bit;
* the dashboard counts exactly the carried state's tensor bytes in the run's width.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hypertrain.challenge.dashboard.document import param_count
from hypertrain.challenge.dashboard.traffic import carried_bytes
from hypertrain.protocol.manifest import CompressionSpec, InnerOptimSpec
from hypertrain.trainer.carried import (
    CarriedState,
    carried_layout,
    carried_size,
    decode_carried,
    encode_carried,
    slot_dtype,
)
from hypertrain.trainer.errors import CheckpointError
from hypertrain.trainer.presets import PRESETS
from hypertrain.trainer.start_state import carried_of, carry_state
from hypertrain.trainer.state import StateConfig, TrainState, init_state
from tests.attacks_found.carried_bf16_review import (
    as_float32,
    bf16_bits,
    float32_bits,
    from_bf16_bits,
    probe_bits,
    rne_reference,
)
from tests.trainer.conftest import make_config

EF = CompressionSpec(bits=4, error_feedback=True)
ALL_BITS = probe_bits()
_FINITE = (rne_reference(ALL_BITS) & 0x7F80) != 0x7F80  # the input rounds to a finite value
BITS = ALL_BITS[_FINITE]  # what carried_of stores; the rest it refuses (below)
WANT = rne_reference(BITS)


def _rounded(values: torch.Tensor) -> np.ndarray:
    """What :func:`carried_of` stores for a final slot holding ``values``."""
    final = TrainState(8, {"optim.exp_avg.w": values}, b"\x00" * 32)
    carried = carried_of(final, {}, CompressionSpec(), slots=torch.bfloat16)
    return bf16_bits(carried.tensors["optim.exp_avg.w"]).ravel()


@pytest.fixture
def threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("count", [1, 2])
def test_the_rounding_is_nearest_even_however_it_is_computed(threads: None, count: int) -> None:
    """Every high half with the tie-deciding low halves (ties both ways, subnormals, -0,
    values that overflow bfloat16's range to infinity) and random patterns: contiguous,
    strided and transposed tensors, one and two threads, with and without the
    flush-denormal mode (which an island's libraries might set) all give the reference."""
    torch.set_num_threads(count)
    flat = as_float32(BITS)
    assert np.array_equal(_rounded(flat), WANT)
    strided = torch.stack([flat, -flat], dim=1)[:, 0]  # stride 2: another kernel path
    assert not strided.is_contiguous()
    assert np.array_equal(_rounded(strided), WANT)
    n = (len(BITS) // 64) * 64
    grid = flat[:n].reshape(64, -1).t()  # a transposed (column-major) slot
    assert np.array_equal(_rounded(grid), rne_reference(BITS[:n]).reshape(64, -1).T.ravel())
    torch.set_flush_denormal(True)
    try:
        assert np.array_equal(_rounded(flat), WANT)
    finally:
        torch.set_flush_denormal(False)
    # the reference's own corner cases, so the comparison above cannot be vacuous
    corners = {0x00000001: 0x0000, 0x00008001: 0x0001, 0x00018000: 0x0002, 0x80000000: 0x8000,
               0x7F7FFFFF: 0x7F80, 0x3F808000: 0x3F80, 0x3F818000: 0x3F82}  # fmt: skip
    got = rne_reference(np.array(list(corners), dtype=np.uint32))
    assert got.tolist() == list(corners.values())


def test_a_value_bfloat16_cannot_hold_is_refused_not_stored() -> None:
    """Inputs that round to Inf or NaN (overflow, Inf, NaN patterns) never become a carried
    state no reader accepts: ``carried_of`` refuses each with a ValueError."""
    refused = ALL_BITS[~_FINITE]
    assert len(refused) > 0
    for chunk in np.array_split(refused, 8):
        with pytest.raises(ValueError, match="not finite"):
            _rounded(as_float32(chunk))


_KERNEL_PROBE = """
import hashlib, sys
import numpy as np, torch
bits = np.frombuffer(sys.stdin.buffer.read(), dtype=np.uint32)
t = torch.from_numpy(bits.view(np.float32).copy())
out = t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()
wide = t.to(torch.bfloat16).float().view(torch.int32).numpy().tobytes()
print(hashlib.sha256(out).hexdigest(), hashlib.sha256(wide).hexdigest())
"""


@pytest.mark.parametrize("portable", [True, False], ids=["portable-kernel", "native-kernel"])
def test_every_cpu_kernel_rounds_and_widens_alike(portable: bool) -> None:
    """Machines dispatch torch's conversion to different vector kernels (ATen's CPU
    capability); an island and its auditor on different CPUs must agree bit for bit: the
    portable scalar kernel (``ATEN_CPU_CAPABILITY=default``, on every machine) and the one
    this machine picks for itself both give the reference."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    env["OMP_NUM_THREADS"] = "1"
    if portable:
        env["ATEN_CPU_CAPABILITY"] = "default"
    done = subprocess.run(
        [sys.executable, "-c", _KERNEL_PROBE], input=BITS.astype(np.uint32).tobytes(),
        capture_output=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    rounded, widened = done.stdout.decode().split()
    wide = (WANT.astype(np.uint32) << 16).astype(np.uint32)
    assert rounded == hashlib.sha256(WANT.view(np.int16).tobytes()).hexdigest()
    assert widened == hashlib.sha256(wide.view(np.int32).tobytes()).hexdigest()


def test_the_next_start_state_holds_the_rounded_bits_widened_exactly() -> None:
    """``carry_state`` widens every bfloat16 pattern (subnormals and -0 included) to the
    float32 pattern ``bits << 16``, for every finite bfloat16 value."""
    config = StateConfig(make_config().model, make_config(state_policy="carry",
                         carried_dtype="bfloat16").inner)  # fmt: skip
    final = init_state(config, 3)
    every = np.arange(1 << 16, dtype=np.uint32)
    finite = every[(every & 0x7F80) != 0x7F80].astype(np.uint16)
    tensors: dict[str, torch.Tensor] = {}
    for spec in carried_layout(config):
        n = int(np.prod(spec.shape))
        tensors[spec.name] = from_bf16_bits(np.resize(finite, n), spec.shape)
    data = encode_carried(CarriedState(final.step, tensors, config.digest()))
    back = decode_carried(data, config)
    assert encode_carried(back) == data  # odd but finite patterns survive bit for bit
    state = carry_state(back, final.params(), config)
    for name, t in tensors.items():
        want = bf16_bits(t).astype(np.uint32).ravel() << 16
        assert state.tensors[name].dtype == torch.float32
        assert np.array_equal(float32_bits(state.tensors[name]).ravel(), want)


def _bf16_config(error_feedback: bool = False) -> StateConfig:
    config = make_config(state_policy="carry", carried_dtype="bfloat16")
    return StateConfig(config.model, config.inner, error_feedback)


def _honest(config: StateConfig) -> tuple[TrainState, dict[str, torch.Tensor], bytes]:
    final = init_state(config, 1)
    g = torch.Generator().manual_seed(1)
    tensors = {k: v + 0.01 * torch.randn(v.shape, generator=g) for k, v in final.tensors.items()}
    final = TrainState(42, tensors, final.config_digest)
    start = {k: v + 0.02 * torch.randn(v.shape, generator=g) for k, v in final.params().items()}
    comp = EF if config.error_feedback else CompressionSpec()
    data = encode_carried(carried_of(final, start, comp, slots=slot_dtype(config.inner)))
    return final, start, data


@pytest.mark.parametrize(
    "pattern", [0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFFFF, 0x7FFF],
    ids=["+inf", "-inf", "qnan", "-qnan", "snan", "nan-ffff", "nan-7fff"],
)  # fmt: skip
def test_every_bfloat16_nan_and_inf_pattern_is_refused(pattern: int) -> None:
    """torch writes NaN as 0xFFFF from its vector kernel and 0x7FC0 from its scalar one;
    any NaN or Inf pattern in any slot is a typed refusal, never a start state."""
    config = _bf16_config()
    _, _, data = _honest(config)
    carried = decode_carried(data, config)
    for name in [n for n in carried.tensors if n.startswith("optim.")][:3]:
        bits = bf16_bits(carried.tensors[name]).ravel()
        bits[len(bits) // 2] = pattern
        tensors = {
            **carried.tensors,
            name: from_bf16_bits(bits, tuple(carried.tensors[name].shape)),
        }
        bad = encode_carried(CarriedState(carried.step, tensors, carried.config_digest))
        assert len(bad) == len(data)
        with pytest.raises(CheckpointError, match="NaN or Inf"):
            decode_carried(bad, config)


def _retyped(data: bytes, config: StateConfig, change: dict[str, torch.dtype]) -> bytes:
    carried = decode_carried(data, config)
    tensors = {n: t.to(change[n]) if n in change else t for n, t in carried.tensors.items()}
    return encode_carried(CarriedState(carried.step, tensors, carried.config_digest))


def test_a_slot_or_residual_of_another_width_is_refused() -> None:
    """A bfloat16 run's carried state with one slot in float32 or float16, or with its
    residual narrowed to bfloat16 (half the residual's bytes), is a typed refusal."""
    config = _bf16_config(error_feedback=True)
    _, _, data = _honest(config)
    names = list(decode_carried(data, config).tensors)
    slot = next(n for n in names if n.startswith("optim."))
    residual = next(n for n in names if n.startswith("residual."))
    for change in ({slot: torch.float32}, {slot: torch.float16}, {residual: torch.bfloat16}):
        with pytest.raises(CheckpointError, match="dtype code"):
            decode_carried(_retyped(data, config, change), config)
    assert decode_carried(data, config).tensors[residual].dtype == torch.float32


def test_a_negative_second_moment_is_not_the_readers_business() -> None:
    """The reader checks format, not plausibility: a negative ``exp_avg_sq`` (no AdamW
    state can hold one) decodes. What binds it is the audit (the final segment's carried
    check, then leaf 0: test_carried_bf16_review_audit.py); this pins what the docs
    claim and no more."""
    config = _bf16_config()
    _, _, data = _honest(config)
    carried = decode_carried(data, config)
    tensors = {n: -t.abs() - 1 if "exp_avg_sq" in n else t for n, t in carried.tensors.items()}
    assert any("exp_avg_sq" in n for n in tensors)
    forged = encode_carried(CarriedState(carried.step, tensors, carried.config_digest))
    back = decode_carried(forged, config)
    assert all(bool((t < 0).all()) for n, t in back.tensors.items() if "exp_avg_sq" in n)


@pytest.mark.parametrize("carried_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
@pytest.mark.parametrize("error_feedback", [False, True])
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_dashboard_counts_the_carried_tensor_bytes_exactly(
    carried_dtype: str, optimizer: str, error_feedback: bool, preset: str
) -> None:
    """Every preset (dense, MoE, tied or not), both optimizers, with and without a
    residual: the service's torch-free count is the carried state's tensor bytes to the
    byte (headers, which it leaves out by design, are the only difference)."""
    spec = PRESETS[preset]
    inner = InnerOptimSpec(name=optimizer, state_policy="carry", carried_dtype=carried_dtype)  # type: ignore[arg-type]
    manifest = SimpleNamespace(model=spec, inner=inner, compression=CompressionSpec(
        error_feedback=error_feedback))  # fmt: skip
    config = StateConfig(spec, inner, error_feedback)
    layout = carried_layout(config)
    data = sum(int(np.prod(s.shape, dtype=np.int64)) * s.dtype.itemsize for s in layout)
    assert carried_bytes(manifest, param_count(spec)) == data  # type: ignore[arg-type]
    headers = carried_size(config) - data
    assert 0 < headers < 200 * len(layout)
    slots = [s for s in layout if s.name.startswith("optim.")]
    assert {s.dtype for s in slots} == {slot_dtype(inner)}
    assert all(s.dtype == torch.float32 for s in layout if s not in slots)


def test_an_encoded_bfloat16_carried_state_is_exactly_its_counted_size() -> None:
    """The bytes an island uploads are ``carried_size`` (the fetch limit), in both widths,
    and the bfloat16 one is the float32 one less two bytes per slot value."""
    for ef in (False, True):
        narrow = _bf16_config(ef)
        wide = StateConfig(narrow.model, make_config(state_policy="carry").inner, ef)
        _, _, data = _honest(narrow)
        _, _, data32 = _honest(wide)
        assert len(data) == carried_size(narrow) and len(data32) == carried_size(wide)
        slot_values = sum(
            int(np.prod(s.shape)) for s in carried_layout(narrow) if s.name.startswith("optim.")
        )
        assert len(data32) - len(data) == 2 * slot_values
