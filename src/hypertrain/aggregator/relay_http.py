"""A small client for the relay's wire protocol (``GET/HEAD/PUT /blobs/{sha256}``).

The relay package sits above the aggregator in the import layering, so the
aggregator speaks the documented HTTP contract directly instead of importing
``hypertrain.relay``: a PUT carries ``Authorization: Envelope <base64url(JCS
envelope)>`` where the envelope is a signed ``blob-put`` body (hash, size, round,
kind); a GET is re-hashed before anything trusts it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Literal

import httpx

from hypertrain.aggregator.errors import BlobError
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import BlobPut

BlobKind = Literal["update", "checkpoint", "model", "outer_state", "tape", "other"]
BLOB_PUT_DOMAIN = "blob-put"
CHUNK = 1 << 20


class RelayHttp:
    """Download and upload blobs on one relay for one run."""

    def __init__(
        self,
        base_url: str,
        run_id: str,
        key: Hotkey | None = None,
        *,
        http: httpx.Client | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.run_id = run_id
        self.key = key
        self._http = http or httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def url(self, sha256: str) -> str:
        return f"{self.base_url}/blobs/{sha256}"

    def exists(self, sha256: str) -> int | None:
        resp = self._http.head(self.url(sha256))
        if resp.status_code == 404:
            return None
        _raise_for(resp, sha256)
        return int(resp.headers["content-length"])

    def get_to_file(self, sha256: str, path: Path, max_bytes: int = 1 << 36) -> Path:
        """Stream a blob to ``path`` atomically, refusing a hash mismatch."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".part-", dir=path.parent)
        digest, received = hashlib.sha256(), 0
        try:
            with os.fdopen(fd, "wb") as handle, self._http.stream("GET", self.url(sha256)) as resp:
                if resp.status_code != 200:
                    resp.read()
                    _raise_for(resp, sha256)
                for chunk in resp.iter_bytes(CHUNK):
                    received += len(chunk)
                    if received > max_bytes:
                        raise BlobError("too_large", f"blob {sha256[:16]}… exceeds {max_bytes} B")
                    digest.update(chunk)
                    handle.write(chunk)
            if digest.hexdigest() != sha256:
                raise BlobError("hash_mismatch", f"relay sent other bytes for {sha256[:16]}…")
            Path(name).replace(path)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        return path

    def put(self, data: bytes, *, kind: BlobKind, round: int, expiry_round: int) -> str:
        """Upload ``data`` (idempotent: a blob the relay holds is not sent again)."""
        if self.key is None:
            raise BlobError("no_key", "uploading to the relay needs a key")
        sha256 = hashlib.sha256(data).hexdigest()
        if self.exists(sha256) == len(data):
            return sha256
        body = BlobPut(sha256=sha256, size=len(data), round=round, kind=kind)
        env = seal(
            self.key, domain=BLOB_PUT_DOMAIN, run_id=self.run_id,
            body=body.model_dump(), expiry_round=expiry_round,
        )  # fmt: skip
        token = base64.urlsafe_b64encode(env.to_bytes()).rstrip(b"=").decode("ascii")
        headers = {"authorization": f"Envelope {token}", "content-type": "application/octet-stream"}
        resp = self._http.put(self.url(sha256), content=data, headers=headers)
        _raise_for(resp, sha256)
        return sha256


def _raise_for(resp: httpx.Response, sha256: str) -> None:
    if resp.status_code in (200, 201):
        return
    if resp.status_code == 404:
        raise BlobError("missing_blob", f"the relay has no blob {sha256[:16]}…")
    raise BlobError("relay_error", f"relay answered {resp.status_code}: {resp.text[:300]}")
