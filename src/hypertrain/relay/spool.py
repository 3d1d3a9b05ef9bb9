"""Streaming ingestion: bytes go to a temporary file while their SHA-256 is computed.

Nothing is ever buffered beyond the chunk being written. A spool refuses the upload
as soon as it grows past the announced size, and :meth:`Spool.finish` refuses it if
it is short or hashes to anything but the announced digest; a refused spool deletes
its temporary file, so a bad upload leaves no trace in the store.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from hypertrain.relay.errors import HashMismatchError, RelayError, SizeMismatchError

CHUNK_BYTES: Final = 1 << 20
_IOV_MAX: Final = 512  # below every platform's IOV_MAX (Linux: 1024)
_SHA256_RE: Final = re.compile(r"^[0-9a-f]{64}$")


def validate_sha256(value: str) -> str:
    """Return ``value`` if it is a lowercase hex SHA-256, else raise :class:`RelayError`."""
    if not isinstance(value, str) or not _SHA256_RE.match(value):
        raise RelayError("bad_hash", f"{value!r:.80} is not a lowercase hex SHA-256", 400)
    return value


class Spool:
    """A temporary file that receives one blob and checks its size and hash.

    ``expected_size`` None means "unknown" (a fetch without Content-Length): only the
    ``max_bytes`` bound and the hash are checked then.
    """

    def __init__(
        self, spool_dir: Path, expected_sha256: str, expected_size: int | None, max_bytes: int
    ) -> None:
        spool_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="spool-", dir=spool_dir)
        self.path = Path(name)
        self._file = os.fdopen(fd, "wb", buffering=0)
        self._hash = hashlib.sha256()
        self._expected_sha256 = expected_sha256
        self._expected_size = expected_size
        self._limit = max_bytes if expected_size is None else min(expected_size, max_bytes)
        self.received = 0

    def admit(self, count: int) -> None:
        """Account for ``count`` more bytes; refuse them if past the limit.

        Cheap and non-blocking, so it runs on the event loop for every chunk; the caller
        calls :meth:`abort` once no thread is writing any more.
        """
        self.received += count
        if self.received > self._limit:
            raise SizeMismatchError(f"received more than the allowed {self._limit} bytes")

    def absorb(self, chunks: list[bytes]) -> None:
        """Hash and write already admitted chunks (blocking; may run in a worker thread)."""
        for chunk in chunks:
            self._hash.update(chunk)
        write_all(self._file.fileno(), chunks)

    def write(self, chunk: bytes) -> None:
        """Admit and absorb one chunk; an oversized spool is aborted at once."""
        try:
            self.admit(len(chunk))
        except SizeMismatchError:
            self.abort()
            raise
        self.absorb([chunk])

    def finish(self) -> Path:
        """Flush to disk and verify; returns the spooled file's path."""
        os.fsync(self._file.fileno())
        self._file.close()
        if self._expected_size is not None and self.received != self._expected_size:
            self.abort()
            raise SizeMismatchError(
                f"received {self.received} bytes, announced {self._expected_size}"
            )
        actual = self._hash.hexdigest()
        if actual != self._expected_sha256:
            self.abort()
            raise HashMismatchError(self._expected_sha256, actual)
        return self.path

    def abort(self) -> None:
        """Drop the partial file (safe to call more than once)."""
        if not self._file.closed:
            self._file.close()
        self.path.unlink(missing_ok=True)


def sha256_file(path: Path) -> tuple[str, int]:
    """The hex SHA-256 and size of a file, read in bounded chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def write_all(fd: int, chunks: Sequence[bytes]) -> None:
    """Write ``chunks`` in order with as few ``writev`` calls as possible.

    Many small writes (one per 64-256 KiB network read) cost several times more than
    one gathered write of the same bytes, because the kernel pays its per-call and
    per-page-cache-lookup overhead each time.
    """
    pending = [memoryview(chunk) for chunk in chunks if chunk]
    while pending:
        group = pending[:_IOV_MAX]
        written = os.writev(fd, group)
        done = 0
        while done < len(group) and written >= len(group[done]):
            written -= len(group[done])
            done += 1
        rest = pending[done:]
        if written:
            rest[0] = rest[0][written:]
        pending = rest
