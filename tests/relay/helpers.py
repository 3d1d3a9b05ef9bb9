"""Helpers shared by the relay tests: keys, settings and envelope builders."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.relay.auth import BLOB_PUT_DOMAIN
from hypertrain.relay.settings import RelaySettings

RUN_ID = "run-1"
NOW_ROUND = 1001


@dataclass(frozen=True)
class Keys:
    miner: Hotkey
    other: Hotkey
    stranger: Hotkey
    coordinator: Hotkey


def make_settings(root: Path, keys: Keys, **overrides: Any) -> RelaySettings:
    allow = root / "allow.json"
    if not allow.exists():
        root.mkdir(parents=True, exist_ok=True)
        allow.write_text(
            f'{{"hotkeys": {{"{keys.miner.ss58_address}": 1, "{keys.other.ss58_address}": 2}}}}'
        )
    values: dict[str, Any] = {
        "storage": str(root / "blobs"),
        "state_dir": root / "state",
        "run_id": RUN_ID,
        "allow_list": allow,
        "coordinators": frozenset({keys.coordinator.ss58_address}),
        "max_blob_bytes": 4 << 20,
        "max_round_bytes": 6 << 20,
    }
    values.update(overrides)
    return RelaySettings(**values)


def blob_envelope(
    key: Hotkey,
    data: bytes,
    *,
    round_: int = 3,
    kind: str = "update",
    expiry_round: int = NOW_ROUND + 10,
    sha256: str | None = None,
    size: int | None = None,
    run_id: str = RUN_ID,
    domain: str = BLOB_PUT_DOMAIN,
) -> Envelope:
    body = {
        "sha256": sha256 or hashlib.sha256(data).hexdigest(),
        "size": len(data) if size is None else size,
        "round": round_,
        "kind": kind,
    }
    return seal(key, domain=domain, run_id=run_id, body=body, expiry_round=expiry_round)
