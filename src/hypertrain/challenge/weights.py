"""The platform's ``get_weights``: the ledger's paid amounts per epoch, answered once.

The first successful answer for an epoch is stored as bytes and every later call
returns exactly those bytes, so the platform can rely on the answer being final.
"""

from __future__ import annotations

import math
import time
from typing import Final

from hypertrain.challenge.errors import UnavailableError
from hypertrain.challenge.state import ServiceState
from hypertrain.protocol.canonical import canonical_bytes

MAX_WEIGHTS: Final = 65536


def weights_body(state: ServiceState, epoch: int) -> bytes:
    """The persisted answer for ``epoch``, computing and storing it on first call."""
    row = state.conn.execute(
        "SELECT body FROM weights_answers WHERE epoch = ?", (epoch,)
    ).fetchone()
    if row is not None:
        return bytes(row["body"])
    snapshot = state.metagraph.snapshot
    if snapshot is None:
        raise UnavailableError("no metagraph snapshot yet; cannot score", code="no_metagraph")
    answer = state.ledger.get_weights(epoch, sorted(snapshot.hotkeys))
    weights = dict(answer.weights)
    bad = [k for k, v in weights.items() if not math.isfinite(v) or v < 0]
    if bad or len(weights) > MAX_WEIGHTS or not math.isfinite(answer.full_share_mass):
        raise UnavailableError(
            "ledger produced invalid weights; refusing to answer", code="bad_weights"
        )
    body = canonical_bytes(
        {
            "challenge_slug": state.settings.slug,
            "epoch": epoch,
            "weights": weights,
            "full_share_mass": answer.full_share_mass,
            "metadata": {**answer.metadata, "metagraph_epoch": snapshot.epoch},
            "computed_at": int(time.time()),
        }
    )
    state.conn.execute("INSERT OR IGNORE INTO weights_answers VALUES (?, ?)", (epoch, body))
    stored = state.conn.execute(
        "SELECT body FROM weights_answers WHERE epoch = ?", (epoch,)
    ).fetchone()
    return bytes(stored["body"])
