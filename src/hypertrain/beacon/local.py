"""The local beacon: a drand-compatible signer for the devnet.

A :class:`LocalBeacon` holds a locally generated BLS secret key and signs round ``r``
exactly as drand quicknet does (same scheme, same message, same DST), so production
and devnet run the same client and verifier; only the chain info differs. It signs
on demand and refuses any round whose time has not come, so it can never publish a
round early. Its key lives in a JSON key file (mode 0600); its chain (genesis time,
period) lives in ``chain_info.json`` in a state directory so a restart keeps the
same chain hash.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from hypertrain.beacon.bls import SCHEME_ID, generate_secret_key, public_key_of, sign_round
from hypertrain.beacon.chain import ChainInfo, load_chain_info
from hypertrain.beacon.errors import (
    BeaconError,
    FutureRoundError,
    LocalKeyError,
    RoundNotAvailableError,
)
from hypertrain.beacon.timing import round_at
from hypertrain.beacon.verify import Beacon, randomness_of
from hypertrain.protocol.domains import LOCAL_BEACON_GROUP, tagged_hash

DEFAULT_BEACON_ID: Final = "hypertrain-devnet"
CHAIN_INFO_FILE: Final = "chain_info.json"
_MAX_SIGNATURE_CACHE: Final = 4096


def write_json_atomic(path: Path, doc: object, *, mode: int = 0o644) -> None:
    """Write JSON via a temporary file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        json.dump(doc, handle, indent=2, sort_keys=True)
        handle.write("\n")
    tmp.replace(path)


def load_or_create_key(key_file: Path) -> bytes:
    """The secret key in ``key_file``; a new one (written with mode 0600) if it is absent."""
    if not key_file.exists():
        secret = generate_secret_key()
        write_json_atomic(key_file, {"scheme": SCHEME_ID, "secret_key": secret.hex()}, mode=0o600)
        return secret
    try:
        doc = json.loads(key_file.read_text())
        secret = bytes.fromhex(doc["secret_key"])
        public_key_of(secret)
    except (ValueError, KeyError, TypeError) as exc:
        raise LocalKeyError(f"key file {key_file} is unusable: {exc}") from exc
    if doc.get("scheme") != SCHEME_ID:
        raise LocalKeyError(f"key file {key_file} is not for scheme {SCHEME_ID}")
    return secret


def local_chain(secret_key: bytes, period_s: int, genesis_time: int, beacon_id: str) -> ChainInfo:
    """The chain description of a local beacon key."""
    public_key = public_key_of(secret_key)
    return ChainInfo(
        public_key=public_key,
        period_s=period_s,
        genesis_time=genesis_time,
        group_hash=tagged_hash(LOCAL_BEACON_GROUP, public_key),
        beacon_id=beacon_id,
    )


class LocalBeacon:
    """Signs rounds of a local chain on demand, never before their time."""

    def __init__(
        self, secret_key: bytes, chain: ChainInfo, *, clock: Callable[[], float] = time.time
    ) -> None:
        if public_key_of(secret_key) != chain.public_key:
            raise LocalKeyError("the secret key does not match the chain's public key")
        self._secret_key = secret_key
        self.chain = chain
        self._clock = clock
        self._signatures: dict[int, bytes] = {}
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        key_file: Path,
        state_dir: Path,
        *,
        period_s: int = 1,
        beacon_id: str = DEFAULT_BEACON_ID,
        clock: Callable[[], float] = time.time,
    ) -> LocalBeacon:
        """Load (or create) the key and the chain; a restart keeps the same chain."""
        secret = load_or_create_key(key_file)
        info_path = state_dir / CHAIN_INFO_FILE
        if info_path.exists():
            try:
                chain = load_chain_info(info_path)
            except BeaconError as exc:
                raise LocalKeyError(f"{info_path} is unusable: {exc}") from exc
            wanted = (public_key_of(secret), period_s, beacon_id)
            if (chain.public_key, chain.period_s, chain.beacon_id) != wanted:
                raise LocalKeyError(
                    f"{info_path} describes another chain (key, period or beacon id differ); "
                    "use a fresh state directory"
                )
        else:
            chain = local_chain(secret, period_s, int(clock()), beacon_id)
            write_json_atomic(info_path, chain.to_json())
        return cls(secret, chain, clock=clock)

    def current_round(self) -> int:
        """The latest round whose time has come (0 before genesis)."""
        return round_at(self.chain, self._clock())

    def beacon(self, round_number: int) -> Beacon:
        """The signed beacon of a round that is due; FutureRoundError otherwise."""
        current = self.current_round()
        if round_number > current:
            raise FutureRoundError(f"round {round_number} is not due yet (current {current})")
        if round_number < 1:
            raise RoundNotAvailableError(f"round {round_number} does not exist")
        with self._lock:
            signature = self._signatures.get(round_number)
        if signature is None:
            signature = sign_round(self._secret_key, round_number)
            with self._lock:
                if len(self._signatures) >= _MAX_SIGNATURE_CACHE:
                    self._signatures.clear()
                self._signatures[round_number] = signature
        return Beacon(round_number, signature, randomness_of(signature))

    def latest(self) -> Beacon:
        """The beacon of the current round."""
        current = self.current_round()
        if current < 1:
            raise RoundNotAvailableError("the chain's genesis time has not come yet")
        return self.beacon(current)
