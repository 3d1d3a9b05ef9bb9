"""sr25519 identities: SS58 addresses, hotkeys, strict signature checks, wallet files.

Keys and signing come from ``bittensor-wallet`` so miners reuse the hotkeys they
already have (``~/.bittensor/wallets/<wallet>/hotkeys/<hotkey>``). Verification uses
``py-sr25519-bindings`` directly: ``Keypair.verify`` also accepts a signature over
``b"<Bytes>" + m + b"</Bytes>"`` as one over ``m``, which a protocol must not.
Messages are always bytes (never str, which the wallet library may read as hex).

SS58 (format 42 by default): ``base58(prefix || pk32 || blake2b512(b"SS58PRE" ||
prefix || pk32)[:2])`` for one-byte prefixes 0..63.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import sr25519
from bittensor_wallet import Keypair

from hypertrain.protocol.errors import IdentityError

SS58_FORMAT: Final = 42
PUBLIC_KEY_SIZE: Final = 32
SIGNATURE_SIZE: Final = 64
SEED_SIZE: Final = 32
MAX_KEY_FILE_BYTES: Final = 64 * 1024
DEFAULT_WALLET_PATH: Final = "~/.bittensor/wallets"

_B58_ALPHABET: Final = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX: Final = {c: i for i, c in enumerate(_B58_ALPHABET)}
_SS58_PREFIX: Final = b"SS58PRE"


def _b58encode(data: bytes) -> str:
    num = int.from_bytes(data, "big")
    out = []
    while num:
        num, rem = divmod(num, 58)
        out.append(_B58_ALPHABET[rem])
    pad = len(data) - len(data.lstrip(b"\x00"))
    return "1" * pad + "".join(reversed(out))


def _b58decode(text: str) -> bytes:
    num = 0
    for char in text:
        if char not in _B58_INDEX:
            raise IdentityError(f"SS58 address contains {char!r}, which is not a base58 character")
        num = num * 58 + _B58_INDEX[char]
    pad = len(text) - len(text.lstrip("1"))
    body = num.to_bytes((num.bit_length() + 7) // 8, "big")
    return b"\x00" * pad + body


def _ss58_checksum(payload: bytes) -> bytes:
    return hashlib.blake2b(_SS58_PREFIX + payload, digest_size=64).digest()[:2]


def ss58_encode(public_key: bytes, ss58_format: int = SS58_FORMAT) -> str:
    """The SS58 address of a 32-byte public key."""
    if len(public_key) != PUBLIC_KEY_SIZE:
        raise IdentityError(f"public key must be {PUBLIC_KEY_SIZE} bytes, got {len(public_key)}")
    if not 0 <= ss58_format < 64:
        raise IdentityError(f"SS58 format {ss58_format} is not a one-byte prefix (0..63)")
    payload = bytes([ss58_format]) + public_key
    return _b58encode(payload + _ss58_checksum(payload))


def ss58_decode(address: str, ss58_format: int | None = SS58_FORMAT) -> bytes:
    """The public key inside an SS58 address; refuses bad length, checksum or format."""
    if not isinstance(address, str) or not 40 <= len(address) <= 60:
        raise IdentityError(f"{address!r:.70} is not an SS58 address (wrong length)")
    return _ss58_decode_checked(address, ss58_format)


@functools.lru_cache(maxsize=8192)
def _ss58_decode_checked(address: str, ss58_format: int | None) -> bytes:
    # Cached: the same signers come back with every message, and base58 is slow.
    raw = _b58decode(address)
    if len(raw) != 1 + PUBLIC_KEY_SIZE + 2:
        raise IdentityError(f"SS58 address {address} decodes to {len(raw)} bytes, expected 35")
    payload, checksum = raw[:-2], raw[-2:]
    if _ss58_checksum(payload) != checksum:
        raise IdentityError(f"SS58 address {address} has a bad checksum")
    if payload[0] >= 64:
        raise IdentityError(f"SS58 address {address} uses an unsupported two-byte prefix")
    if ss58_format is not None and payload[0] != ss58_format:
        raise IdentityError(f"SS58 address {address} has format {payload[0]}, need {ss58_format}")
    return payload[1:]


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Strict sr25519 verification of ``signature`` over exactly ``message``."""
    if len(public_key) != PUBLIC_KEY_SIZE or len(signature) != SIGNATURE_SIZE:
        return False
    try:
        return bool(sr25519.verify(signature, message, public_key))
    except (ValueError, TypeError):
        return False


@dataclass(frozen=True, slots=True)
class Hotkey:
    """An sr25519 signing key (a Bittensor hotkey)."""

    keypair: Keypair

    @classmethod
    def from_seed(cls, seed: bytes) -> Hotkey:
        """From a 32-byte mini-secret seed."""
        if len(seed) != SEED_SIZE:
            raise IdentityError(f"seed must be {SEED_SIZE} bytes, got {len(seed)}")
        # The runtime takes the seed as hex text although its stub says bytes.
        return cls(Keypair.create_from_seed(seed.hex()))  # type: ignore[arg-type]

    @classmethod
    def generate(cls) -> Hotkey:
        return cls.from_seed(secrets.token_bytes(SEED_SIZE))

    @property
    def public_key(self) -> bytes:
        key = self.keypair.public_key
        assert key is not None
        return bytes(key)

    @property
    def ss58_address(self) -> str:
        return ss58_encode(self.public_key)

    def sign(self, message: bytes) -> bytes:
        if not isinstance(message, bytes):
            raise TypeError("sign bytes only")
        return bytes(self.keypair.sign(message))


def load_key_file(path: Path) -> Hotkey:
    """Load a Bittensor wallet key file (unencrypted JSON with ``secretSeed``)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise IdentityError(f"cannot read key file {path}: {exc.strerror}") from exc
    if len(raw) > MAX_KEY_FILE_BYTES:
        raise IdentityError(f"key file {path} is {len(raw)} bytes; not a wallet key file")
    try:
        doc = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IdentityError(
            f"key file {path} is not JSON (encrypted keys are not supported)"
        ) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("secretSeed"), str):
        raise IdentityError(f"key file {path} has no secretSeed field")
    seed = _decode_hex_field(doc["secretSeed"], path, "secretSeed")
    key = Hotkey.from_seed(seed)
    claimed = doc.get("ss58Address")
    if claimed is not None and claimed != key.ss58_address:
        raise IdentityError(f"key file {path}: ss58Address does not match its secretSeed")
    return key


def _decode_hex_field(value: str, path: Path, name: str) -> bytes:
    text = value[2:] if value.startswith("0x") else value
    try:
        return bytes.fromhex(text)
    except ValueError as exc:
        raise IdentityError(f"key file {path}: {name} is not hex") from exc


def wallet_hotkey_path(wallet: str, hotkey: str, root: str = DEFAULT_WALLET_PATH) -> Path:
    """Where Bittensor keeps a hotkey file."""
    return Path(root).expanduser() / wallet / "hotkeys" / hotkey


def load_wallet_hotkey(wallet: str, hotkey: str, root: str = DEFAULT_WALLET_PATH) -> Hotkey:
    """Load ``<root>/<wallet>/hotkeys/<hotkey>`` as written by btcli / bittensor-wallet."""
    return load_key_file(wallet_hotkey_path(wallet, hotkey, root))


def write_key_file(key_seed: bytes, path: Path) -> Hotkey:
    """Write an unencrypted wallet-format key file (mode 0600) for ``key_seed``."""
    key = Hotkey.from_seed(key_seed)
    doc = {
        "secretSeed": "0x" + key_seed.hex(),
        "publicKey": "0x" + key.public_key.hex(),
        "accountId": "0x" + key.public_key.hex(),
        "ss58Address": key.ss58_address,
        "cryptoType": 1,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(doc, handle)
    return key
