"""The header both update encodings share: fixed fields, then the table of tensors.

    header:  magic (4 bytes) | u16 version | the codec's own fields | u32 tensor count
             per tensor: u16 name length | name | u8 dtype code | u8 ndim | u64 dims...

The int8 codec (codec.py) and the sparse codec (sparse_codec.py) differ in their magic,
their own fields and their bodies; this module writes and reads the rest, once, for
both. The whole header comes first, so an update's exact length is known before any
body is read: :func:`read_fixed` and :func:`read_tensors` refuse a truncated update,
another magic or version, more than :data:`MAX_TENSORS` tensors, a malformed tensor
entry (empty name, a dtype other than float32, more than :data:`MAX_NDIM` dims) and any
length other than the header's, each with the codec's own error type.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from hypertrain.trainer.errors import CodecError

MAX_TENSORS = 1 << 16
MAX_NDIM = 8
FLOAT32_CODE = 1


class TensorEntry(Protocol):
    """A codec's per-tensor header: its name and shape."""

    @property
    def name(self) -> str: ...

    @property
    def shape(self) -> tuple[int, ...]: ...


M = TypeVar("M", bound=TensorEntry)


def entry_bytes(name: str, shape: tuple[int, ...]) -> bytes:
    """One tensor's entry of the table."""
    raw = name.encode("utf-8")
    dims = struct.pack(f"<{len(shape)}Q", *shape)
    return struct.pack("<H", len(raw)) + raw + bytes([FLOAT32_CODE, len(shape)]) + dims


def read_fixed(
    data: bytes,
    fixed: struct.Struct,
    magic: bytes,
    version: int,
    kind: str,
    error: type[CodecError],
) -> tuple[Any, ...]:
    """The fields of ``fixed`` after magic and version (the tensor count last), refused
    unless the update starts with ``magic`` and ``version`` (``kind``: for the message)."""
    if len(data) < fixed.size:
        raise error(f"update is truncated ({len(data)} bytes)")
    found, found_version, *fields = fixed.unpack_from(data)
    if found != magic or found_version != version:
        raise error(f"not a version-{version} {kind} update (magic {found!r})")
    return tuple(fields)


def read_tensors(
    data: bytes,
    pos: int,
    count: int,
    meta: Callable[[str, tuple[int, ...]], M],
    body_size: Callable[[M], int],
    error: type[CodecError],
    trailer: Callable[[list[M], int], int] | None = None,
) -> tuple[list[M], int]:
    """The ``count`` tensor entries at ``pos`` (each made by ``meta``) and the offset of
    the first body; refused unless the bodies (``body_size`` each), and the ``trailer``
    after them (its size read from ``data`` at their end), end exactly at the end of
    ``data``."""
    if count > MAX_TENSORS:
        raise error(f"bad header: {count} tensors")
    metas = []
    for _ in range(count):
        name, shape, pos = _read_entry(data, pos, error)
        metas.append(meta(name, shape))
    expected = pos + sum(body_size(m) for m in metas)
    if trailer is not None:
        expected += trailer(metas, expected)
    if len(data) != expected:
        raise error(f"update is {len(data)} bytes, its header implies {expected}")
    return metas, pos


def _read_entry(data: bytes, pos: int, error: type[CodecError]) -> tuple[str, tuple[int, ...], int]:
    try:
        (name_len,) = struct.unpack_from("<H", data, pos)
        name = data[pos + 2 : pos + 2 + name_len].decode("utf-8")
        pos += 2 + name_len
        code, ndim = struct.unpack_from("<BB", data, pos)
        if code != FLOAT32_CODE or ndim > MAX_NDIM or len(name) == 0:
            raise error(f"bad tensor header for {name!r} (dtype {code}, ndim {ndim})")
        shape = struct.unpack_from(f"<{ndim}Q", data, pos + 2)
    except (struct.error, UnicodeDecodeError) as exc:
        raise error(f"update header is truncated or malformed: {exc}") from None
    return name, tuple(shape), pos + 2 + 8 * ndim


def check_tensors(
    metas: Sequence[TensorEntry],
    expected: Sequence[tuple[str, tuple[int, ...]]] | None,
    error: type[CodecError],
) -> None:
    """Refuse an update whose tensors are not ``expected``'s names and shapes, in order."""
    if expected is None:
        return
    if [(m.name, m.shape) for m in metas] != [(n, tuple(s)) for n, s in expected]:
        raise error("update tensors do not match the model's names and shapes")
