"""The streaming pipeline: gathered writes, and spooling a body with checks on the loop."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from hypertrain.relay import pipeline, spool
from hypertrain.relay.errors import HashMismatchError, SizeMismatchError
from hypertrain.relay.pipeline import spool_stream
from hypertrain.relay.spool import Spool, write_all

PIECES = [bytes([i % 251]) * (i * 37 % 5000) for i in range(1, 400)]
DATA = b"".join(PIECES)
SHA = hashlib.sha256(DATA).hexdigest()


def test_write_all_survives_partial_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = iter([1, 4999, 7, 65536, 3] * 10_000)

    def short_writev(fd: int, buffers: list[memoryview]) -> int:
        return os.write(fd, b"".join(bytes(b) for b in buffers)[: next(sizes)])

    monkeypatch.setattr(spool, "_IOV_MAX", 16)
    monkeypatch.setattr(os, "writev", short_writev)
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        write_all(fd, [b"", *PIECES, b""])
    finally:
        os.close(fd)
    assert path.read_bytes() == DATA


async def _body(pieces: list[bytes], seen: list[int]) -> AsyncIterator[bytes]:
    for piece in pieces:
        seen.append(len(piece))
        yield piece


def _run(target: Spool, pieces: list[bytes], seen: list[int] | None = None) -> None:
    anyio.run(spool_stream, target, _body(pieces, [] if seen is None else seen))


def test_stream_spools_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "BATCH_BYTES", 10_000)  # many batches, a short last one
    target = Spool(tmp_path, SHA, len(DATA), 1 << 30)
    _run(target, PIECES)
    assert target.finish().read_bytes() == DATA
    wrong = Spool(tmp_path, SHA, len(DATA), 1 << 30)
    _run(wrong, [*PIECES[:-1], bytes(len(PIECES[-1]))])
    with pytest.raises(HashMismatchError):
        wrong.finish()
    assert not wrong.path.exists()


def test_oversize_refused_at_first_extra_byte(tmp_path: Path) -> None:
    target = Spool(tmp_path, SHA, len(DATA), 1 << 30)
    seen: list[int] = []
    with pytest.raises(SizeMismatchError):
        _run(target, [DATA, b"!", b"never read"], seen)
    assert seen == [len(DATA), 1]  # stopped reading right there
    target.abort()
    assert list(tmp_path.iterdir()) == []


def test_worker_failure_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(_self: Spool, _chunks: list[bytes]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pipeline, "BATCH_BYTES", 1000)
    monkeypatch.setattr(Spool, "absorb", broken)
    target = Spool(tmp_path, SHA, len(DATA), 1 << 30)
    with pytest.raises(OSError, match="No space"):
        _run(target, PIECES)
    target.abort()
    assert list(tmp_path.iterdir()) == []


def test_body_failure_is_raised(tmp_path: Path) -> None:
    async def failing() -> AsyncIterator[bytes]:
        yield DATA[:100]
        raise ConnectionResetError("client went away")

    target = Spool(tmp_path, SHA, len(DATA), 1 << 30)
    with pytest.raises(ConnectionResetError):
        anyio.run(spool_stream, target, failing())
    target.abort()
    assert list(tmp_path.iterdir()) == []
