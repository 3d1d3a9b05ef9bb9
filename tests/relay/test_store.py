"""Spooling and both storage back ends (local filesystem and fsspec)."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from hypertrain.relay.errors import HashMismatchError, NotFoundError, RelayError, SizeMismatchError
from hypertrain.relay.spool import Spool, sha256_file, validate_sha256
from hypertrain.relay.store import BlobStore, FsspecStore, LocalStore, blob_key, open_store

DATA = b"blob bytes " * 1000
SHA = hashlib.sha256(DATA).hexdigest()


def _spool(store: BlobStore, data: bytes = DATA, sha: str = SHA) -> Path:
    spool = Spool(store.spool_dir, sha, len(data), 1 << 20)
    for start in range(0, len(data), 4096):
        spool.write(data[start : start + 4096])
    return spool.finish()


def test_spool_refuses_and_cleans_up(tmp_path: Path) -> None:
    spool = Spool(tmp_path, SHA, len(DATA), 1 << 20)
    with pytest.raises(SizeMismatchError):
        spool.write(DATA + b"!")
    spool = Spool(tmp_path, SHA, len(DATA), 1 << 20)
    spool.write(DATA[:-1])
    with pytest.raises(SizeMismatchError):
        spool.finish()
    spool = Spool(tmp_path, SHA, len(DATA), 1 << 20)
    spool.write(DATA[:-1] + b"?")
    with pytest.raises(HashMismatchError):
        spool.finish()
    unknown = Spool(tmp_path, SHA, None, 100)  # size unknown: bounded by max_bytes
    with pytest.raises(SizeMismatchError):
        unknown.write(DATA)
    assert list(tmp_path.iterdir()) == []


def test_sha_validation_and_file_hash(tmp_path: Path) -> None:
    assert validate_sha256(SHA) == SHA
    for bad in ("", SHA.upper(), SHA[:-1], "../" + SHA[3:]):
        with pytest.raises(RelayError):
            validate_sha256(bad)
    assert blob_key(SHA) == f"blobs/{SHA[:2]}/{SHA[2:4]}/{SHA}"
    path = tmp_path / "f"
    path.write_bytes(DATA)
    assert sha256_file(path) == (SHA, len(DATA))


def _exercise(store: BlobStore) -> None:
    assert store.size(SHA) is None
    with pytest.raises(NotFoundError):
        store.open(SHA)
    spooled = _spool(store)
    assert store.commit(SHA, spooled) is True
    assert not spooled.exists()
    assert store.size(SHA) == len(DATA)
    with store.open(SHA) as handle:
        assert handle.read() == DATA
    # a second commit under the same hash never rewrites what is stored
    assert store.commit(SHA, _spool(store)) is False
    with store.open(SHA) as handle:
        assert handle.read() == DATA
    assert list(store.spool_dir.iterdir()) == []


def test_local_store(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "blobs")
    _exercise(store)
    assert (tmp_path / "blobs" / blob_key(SHA)).read_bytes() == DATA


def test_fsspec_memory_store(tmp_path: Path) -> None:
    url = f"memory://relay-{uuid.uuid4().hex}"
    _exercise(FsspecStore(url, tmp_path / "spool"))


def test_fsspec_file_store(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path / 'bucket'}", tmp_path / "state")
    assert isinstance(store, FsspecStore)
    _exercise(store)
    assert (tmp_path / "bucket" / blob_key(SHA)).read_bytes() == DATA
    assert isinstance(open_store(str(tmp_path / "plain"), tmp_path / "state"), LocalStore)
