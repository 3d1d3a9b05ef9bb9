"""The relay's JSON answers, one pydantic model per shape, shared by the relay and its client.

Blob bytes travel as ``application/octet-stream``; only the upload acknowledgement and
the health probe are JSON. Unknown fields are refused, so a field the relay starts to
send is added here first, for both ends.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BlobStored(_Answer):
    """``PUT /blobs/{sha256}``: the blob is held (``created`` false when it already was)."""

    sha256: str
    size: int
    created: bool
    forwarded: bool


class RelayHealth(_Answer):
    """``GET /healthz``: the relay is up; its upstream and its verified beacon round."""

    ok: bool
    upstream: str | None
    beacon_round: int | None


def receipt_problem(content: bytes, sha256: str, size: int) -> str | None:
    """Why an upload's answer is not a receipt for ``sha256`` at ``size`` (None if it is)."""
    try:
        stored = BlobStored.model_validate_json(content)
    except ValidationError as exc:
        return f"an unusable upload receipt ({exc.error_count()} errors)"
    if stored.sha256 != sha256 or stored.size != size:
        return (
            f"a receipt for {stored.sha256[:16]}… ({stored.size} bytes),"
            f" not the {size}-byte blob {sha256[:16]}… that was sent"
        )
    return None
