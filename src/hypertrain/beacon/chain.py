"""Chain descriptions: what a client pins before it trusts any beacon.

A drand chain is fixed by its public key, period, genesis time, group hash and
beacon id; its *chain hash* is, as drand computes it::

    SHA-256(u32_be(period_s) || i64_be(genesis_time) || public_key || group_hash
            || beacon_id)      # beacon_id omitted when it is "default"

(the scheme id is not hashed). :func:`parse_chain_info` reads drand's ``/info`` JSON,
recomputes that hash, decodes the public key strictly and refuses any scheme other
than ``bls-unchained-g1-rfc9380``; :func:`pin_chain_info` also requires the expected
hash. :data:`QUICKNET` is the production chain.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from py_arkworks_bls12381 import G2Point

from hypertrain.beacon.bls import SCHEME_ID, decode_public_key
from hypertrain.beacon.errors import BeaconError, ChainInfoError, ChainMismatchError
from hypertrain.protocol.canonical import parse_json
from hypertrain.protocol.errors import CanonicalJSONError

DEFAULT_BEACON_ID: Final = "default"
MAX_INFO_BYTES: Final = 64 * 1024
_HEX: Final = re.compile(r"[0-9a-f]*")
_BEACON_ID: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True, slots=True)
class ChainInfo:
    """One drand chain. ``chain_hash`` is derived, so a ChainInfo is always consistent."""

    public_key: bytes
    period_s: int
    genesis_time: int
    group_hash: bytes
    beacon_id: str = DEFAULT_BEACON_ID
    scheme_id: str = SCHEME_ID
    public_key_point: G2Point = field(init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.scheme_id != SCHEME_ID:
            raise ChainInfoError(f"scheme {self.scheme_id!r} is not supported, only {SCHEME_ID}")
        if not 1 <= self.period_s < 2**32:
            raise ChainInfoError(f"period {self.period_s} s must be a positive 32-bit integer")
        if not 0 <= self.genesis_time < 2**63:
            raise ChainInfoError(f"genesis time {self.genesis_time} is out of range")
        if len(self.group_hash) != 32:
            raise ChainInfoError(f"group hash is {len(self.group_hash)} bytes, expected 32")
        if not _BEACON_ID.fullmatch(self.beacon_id):
            raise ChainInfoError(f"beacon id {self.beacon_id!r} is not a short ASCII name")
        try:
            point = decode_public_key(self.public_key)
        except BeaconError as exc:
            raise ChainInfoError(f"bad public key: {exc}") from exc
        object.__setattr__(self, "public_key_point", point)  # decoded once, checked

    @property
    def chain_hash(self) -> bytes:
        """drand's chain hash (32 bytes); see :func:`chain_hash_of`."""
        return chain_hash_of(
            self.period_s, self.genesis_time, self.public_key, self.group_hash, self.beacon_id
        )

    @property
    def chain_hash_hex(self) -> str:
        return self.chain_hash.hex()

    def to_json(self) -> dict[str, Any]:
        """drand's ``/info`` document for this chain."""
        return {
            "public_key": self.public_key.hex(),
            "period": self.period_s,
            "genesis_time": self.genesis_time,
            "hash": self.chain_hash_hex,
            "groupHash": self.group_hash.hex(),
            "schemeID": self.scheme_id,
            "metadata": {"beaconID": self.beacon_id},
        }


def chain_hash_of(
    period_s: int, genesis_time: int, public_key: bytes, group_hash: bytes, beacon_id: str
) -> bytes:
    """drand's chain hash; the layout is in the module docstring (scheme id not hashed)."""
    h = hashlib.sha256()
    h.update(period_s.to_bytes(4, "big"))
    h.update(genesis_time.to_bytes(8, "big", signed=True))
    h.update(public_key)
    h.update(group_hash)
    if beacon_id != DEFAULT_BEACON_ID:
        h.update(beacon_id.encode("ascii"))
    return h.digest()


QUICKNET: Final = ChainInfo(
    public_key=bytes.fromhex(
        "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c"
        "8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb"
        "5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a"
    ),
    period_s=3,
    genesis_time=1692803367,
    group_hash=bytes.fromhex("f477d5c89f21a17c863a7f937c6a6d15859414d2be09cd448d4279af331c5d3e"),
    beacon_id="quicknet",
)
QUICKNET_HASH: Final = "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971"
assert QUICKNET.chain_hash_hex == QUICKNET_HASH


def _hex_field(doc: dict[str, Any], key: str, *, size: int | None = None) -> bytes:
    """A lower-case hex string field of an untrusted document, as bytes."""
    value = doc.get(key)
    if not isinstance(value, str) or not _HEX.fullmatch(value) or len(value) % 2:
        raise ChainInfoError(f"field {key!r} must be a lower-case hex string")
    raw = bytes.fromhex(value)
    if size is not None and len(raw) != size:
        raise ChainInfoError(f"field {key!r} is {len(raw)} bytes, expected {size}")
    return raw


def _int_field(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ChainInfoError(f"field {key!r} must be an integer")
    return value


def parse_chain_info(raw: bytes | str | dict[str, Any]) -> ChainInfo:
    """A verified ChainInfo from drand ``/info`` JSON; the stated hash must match."""
    try:
        doc = raw if isinstance(raw, dict) else parse_json(raw, max_bytes=MAX_INFO_BYTES)
    except CanonicalJSONError as exc:
        raise ChainInfoError(f"chain info is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ChainInfoError("chain info must be a JSON object")
    metadata = doc.get("metadata", {})
    beacon_id = metadata.get("beaconID", DEFAULT_BEACON_ID) if isinstance(metadata, dict) else None
    if not isinstance(beacon_id, str):
        raise ChainInfoError("field 'metadata.beaconID' must be a string")
    scheme = doc.get("schemeID")
    if not isinstance(scheme, str):
        raise ChainInfoError("field 'schemeID' must be a string")
    info = ChainInfo(
        public_key=_hex_field(doc, "public_key"),
        period_s=_int_field(doc, "period"),
        genesis_time=_int_field(doc, "genesis_time"),
        group_hash=_hex_field(doc, "groupHash"),
        beacon_id=beacon_id,
        scheme_id=scheme,
    )
    stated = _hex_field(doc, "hash", size=32)
    if stated != info.chain_hash:
        raise ChainInfoError(
            f"stated chain hash {stated.hex()} does not match the recomputed "
            f"{info.chain_hash_hex}: the description was altered"
        )
    return info


def pin_chain_info(raw: bytes | str | dict[str, Any], expected_hash_hex: str) -> ChainInfo:
    """Parse chain info and require it to be the chain with ``expected_hash_hex``."""
    info = parse_chain_info(raw)
    if info.chain_hash_hex != expected_hash_hex.lower():
        raise ChainMismatchError(
            f"chain info is for chain {info.chain_hash_hex}, expected {expected_hash_hex}"
        )
    return info


def check_same_chain(pinned: ChainInfo, other: ChainInfo) -> None:
    """Raise :class:`ChainMismatchError` unless ``other`` is exactly the pinned chain."""
    if other != pinned:
        raise ChainMismatchError(
            f"endpoint serves chain {other.chain_hash_hex}, pinned chain is {pinned.chain_hash_hex}"
        )


def load_chain_info(path: Path) -> ChainInfo:
    """Read and verify a chain info JSON file (drand ``/info`` format)."""
    return parse_chain_info(path.read_bytes())
