"""Blob storage back ends: the local filesystem (default) and any fsspec filesystem.

Blobs live at ``blobs/<h[0:2]>/<h[2:4]>/<h>`` (fan-out keeps directories small).
A blob only ever appears complete: the local store renames a verified spool file into
place; on S3 one ``PutObject`` is atomic (an object becomes visible only once whole) and
carries ``If-None-Match: *``, so the server itself refuses to replace a stored blob even
when two uploads race; other fsspec back ends get a temporary key that is then moved.
An existing blob is never overwritten, so a later upload, good or bad, cannot harm it,
nor move its arrival record (``arrived``: the time its bytes were stored,
:mod:`hypertrain.relay.arrival`).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Final, Protocol

import fsspec

from hypertrain.relay.arrival import info_arrival
from hypertrain.relay.errors import NotFoundError, StorageError
from hypertrain.relay.spool import validate_sha256


def blob_key(sha256: str) -> str:
    """The relative storage key of a blob."""
    validate_sha256(sha256)
    return f"blobs/{sha256[0:2]}/{sha256[2:4]}/{sha256}"


class BlobStore(Protocol):
    """What the relay needs from storage."""

    @property
    def spool_dir(self) -> Path: ...

    def size(self, sha256: str) -> int | None:
        """The stored blob's size, or None if absent."""

    def open(self, sha256: str) -> IO[bytes]:
        """Open a stored blob for reading; raises :class:`NotFoundError` if absent."""

    def arrived(self, sha256: str) -> float | None:
        """Unix time the blob was first stored (None: absent, or no record kept)."""

    def commit(self, sha256: str, spooled: Path) -> bool:
        """Move a verified spool file into place; False if the blob was already stored."""


class LocalStore:
    """Blobs on a local filesystem, committed by atomic rename; ``now`` stamps each new
    blob's modification time (its arrival record) with the relay's clock."""

    def __init__(self, root: Path, now: Callable[[], float] = time.time) -> None:
        self.root = root
        self.now = now
        self._spool = root / "spool"
        self._spool.mkdir(parents=True, exist_ok=True)

    @property
    def spool_dir(self) -> Path:
        return self._spool

    def _path(self, sha256: str) -> Path:
        return self.root / blob_key(sha256)

    def size(self, sha256: str) -> int | None:
        try:
            return self._path(sha256).stat().st_size
        except FileNotFoundError:
            return None

    def arrived(self, sha256: str) -> float | None:
        try:  # the spooled file's mtime; link() never replaces it, so it never moves
            return self._path(sha256).stat().st_mtime
        except FileNotFoundError:
            return None

    def open(self, sha256: str) -> IO[bytes]:
        try:
            return self._path(sha256).open("rb")
        except FileNotFoundError as exc:
            raise NotFoundError(sha256) from exc

    def commit(self, sha256: str, spooled: Path) -> bool:
        target = self._path(sha256)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            stamp = self.now()
            os.utime(spooled, (stamp, stamp))
            # link() refuses to replace an existing name, so nothing stored is touched.
            os.link(spooled, target)
        except FileExistsError:
            return False
        finally:
            spooled.unlink(missing_ok=True)
        _fsync_dir(target.parent)
        return True


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Back ends whose single-object put is atomic and may carry If-None-Match (s3fs's
# ``mode="create"``; AWS S3 honours it since 2024, and so does moto, which the tests run).
# A server that ignores it leaves only a race between two uploads of one blob unguarded.
EXCLUSIVE_PUT_PROTOCOLS: Final = frozenset({"s3", "s3a"})


class FsspecStore:
    """Blobs on any fsspec filesystem (``s3://bucket/prefix``, ``memory://``, ``file://``).

    S3 settings other than the bucket and prefix come from the environment, as for every
    AWS tool: ``AWS_ENDPOINT_URL_S3`` (or ``AWS_ENDPOINT_URL``) for a server other than
    AWS, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_DEFAULT_REGION``.
    """

    def __init__(self, url: str, spool_dir: Path, **storage_options: Any) -> None:
        self.url = url
        fs, root = fsspec.core.url_to_fs(url, **storage_options)
        self._fs: Any = fs
        self._root = str(root).rstrip("/")
        self._spool = spool_dir
        self._spool.mkdir(parents=True, exist_ok=True)
        protocols = fs.protocol if isinstance(fs.protocol, tuple | list) else (fs.protocol,)
        self.exclusive_put = not EXCLUSIVE_PUT_PROTOCOLS.isdisjoint(protocols)
        if self.exclusive_put:
            self._check_bucket()

    def _check_bucket(self) -> None:
        bucket = self._root.split("/", 1)[0]
        if not self._fs.exists(bucket):
            raise StorageError(
                f"bucket {bucket!r} of {self.url} cannot be reached: it is missing (the relay"
                " does not create it), the credentials may not read it, or the endpoint"
                " (AWS_ENDPOINT_URL_S3) is wrong"
            )

    @property
    def spool_dir(self) -> Path:
        return self._spool

    def _path(self, key: str) -> str:
        return f"{self._root}/{key}"

    def size(self, sha256: str) -> int | None:
        try:
            info = self._fs.info(self._path(blob_key(sha256)))
        except FileNotFoundError:
            return None
        return int(info["size"])

    def arrived(self, sha256: str) -> float | None:
        try:  # S3: LastModified of the object, which no later upload replaces
            info = self._fs.info(self._path(blob_key(sha256)))
        except FileNotFoundError:
            return None
        return info_arrival(dict(info))

    def open(self, sha256: str) -> IO[bytes]:
        try:
            handle: IO[bytes] = self._fs.open(self._path(blob_key(sha256)), "rb")
        except FileNotFoundError as exc:
            raise NotFoundError(sha256) from exc
        return handle

    def commit(self, sha256: str, spooled: Path) -> bool:
        target = self._path(blob_key(sha256))
        try:
            if self._fs.exists(target):  # spares the upload; the put below decides
                return False
            if self.exclusive_put:
                return self._put_exclusive(spooled, target)
            self._put_and_move(spooled, target)
        finally:
            spooled.unlink(missing_ok=True)
        return True

    def _put_exclusive(self, spooled: Path, target: str) -> bool:
        try:
            self._fs.put_file(str(spooled), target, mode="create")
        except FileExistsError:  # 412: a racing upload stored it first
            return False
        return True

    def _put_and_move(self, spooled: Path, target: str) -> None:
        temp = self._path(f"tmp/{uuid.uuid4().hex}")
        self._fs.makedirs(self._path("tmp"), exist_ok=True)
        self._fs.put_file(str(spooled), temp)
        self._fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        self._fs.mv(temp, target)


def open_store(storage: str, state_dir: Path, now: Callable[[], float] = time.time) -> BlobStore:
    """A store for ``storage``: a directory path, or an fsspec URL (``s3://...``, whose
    arrival record is the back end's own clock); ``now``: the relay's clock."""
    if "://" in storage:
        return FsspecStore(storage, state_dir / "spool")
    return LocalStore(Path(storage), now)
