"""The relay's arrival record: the beacon round at which a blob first arrived.

A blob's first arrival is a fact the store keeps and a later upload never moves: the
local store keeps the stored file's modification time (the moment its last byte was
spooled; an existing blob is never replaced, so a re-upload leaves it alone), an fsspec
store the object's ``LastModified`` (S3), ``mtime`` or ``created``. The relay converts
it with its beacon clock (:class:`~hypertrain.relay.clock.BeaconClock`, the rule the
service uses: round ``r`` is published at ``genesis + (r - 1) * period``) and
publishes it on ``HEAD /blobs/{sha256}`` (and on ``GET`` where it has no upstream) as
the ``x-hypertrain-arrival-round`` header. A relay with an upstream publishes its
upstream's record (the origin relay's), never its own cache's, so every party reads one
fact whichever relay it asks. A blob
without a record (a store that keeps none, or a copy only a regional relay holds) is
served without the header.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from hypertrain.relay.errors import ArrivalError

ARRIVAL_HEADER: Final = "x-hypertrain-arrival-round"
_MAX_ROUND: Final = 2**53


def parse_arrival(value: str | None) -> int | None:
    """The beacon round an ``x-hypertrain-arrival-round`` value names (None: absent);
    anything but a plain decimal round raises :class:`ArrivalError`."""
    if value is None:
        return None
    text = value.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 16 or int(text) > _MAX_ROUND:
        raise ArrivalError(f"arrival record {value[:40]!r} is not a beacon round")
    return int(text)


def info_arrival(info: dict[str, Any]) -> float | None:
    """Unix time of an fsspec object's creation, from its ``info()`` (None: no record)."""
    for key in ("LastModified", "mtime", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None
