"""Service settings, read once from the environment (see docs/operator.md for every name).

Secrets never travel in the environment or on the command line: the environment
names *files*. A token file is refused when it is missing, empty, a placeholder or
readable by group or others; the coordinator key file must hold 32 bytes as hex
(what ``openssl rand -hex 32`` writes). Tokens are kept in :class:`Secret`, whose
``repr`` hides the value so it cannot leak into a log line or a traceback.
"""

from __future__ import annotations

import hmac
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from hypertrain.challenge.errors import SettingsError
from hypertrain.protocol.identity import Hotkey, ss58_decode

DEFAULT_BEACON_URLS: Final = ("https://api.drand.sh", "https://drand.cloudflare.com")
MIN_TOKEN_CHARS: Final = 16
_PLACEHOLDERS: Final = frozenset({"changeme", "change-me", "secret", "token", "password", "xxx"})

MetagraphSource = Literal["master", "file", "chain"]


class Secret:
    """A bearer token; compares in constant time and never prints its value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value.encode("utf-8")

    def matches(self, presented: str) -> bool:
        return hmac.compare_digest(self._value, presented.encode("utf-8", "replace"))

    def reveal(self) -> str:
        return self._value.decode("utf-8")

    def __repr__(self) -> str:
        return "Secret(***)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Everything the service needs; build with :func:`settings_from_env` or directly in tests."""

    slug: str = "hypertrain"
    state_dir: Path
    internal_token: Secret
    coordinator_key: Hotkey = field(repr=False)
    admin_token: Secret | None = None
    worker_token: Secret | None = None
    master_url: str | None = None
    netuid: int = 100
    metagraph_source: MetagraphSource = "master"
    metagraph_file: Path | None = None
    metagraph_refresh_s: float = 60.0
    chain_network: str = "finney"
    beacon_urls: tuple[str, ...] = DEFAULT_BEACON_URLS
    beacon_info_file: Path | None = None
    beacon_poll_s: float = 1.0
    worker_hotkeys: frozenset[str] = frozenset()
    max_body_bytes: int = 1 << 20

    def __post_init__(self) -> None:
        if not self.slug or not self.slug.replace("-", "").replace("_", "").isalnum():
            raise SettingsError(f"CHALLENGE_SLUG {self.slug!r} must be alphanumeric (- and _ ok)")
        if self.metagraph_source == "master" and not self.master_url:
            raise SettingsError("CHALLENGE_MASTER_URL is required with the master metagraph")
        if self.metagraph_source == "file" and self.metagraph_file is None:
            raise SettingsError("HYPERTRAIN_METAGRAPH_FILE is required with the file metagraph")
        if not self.beacon_urls:
            raise SettingsError("HYPERTRAIN_BEACON_URLS names no endpoint")


def read_token_file(path: Path, name: str) -> Secret:
    """Read a bearer token file, refusing unsafe or unusable ones."""
    text = _read_private_file(path, name)
    if len(text) < MIN_TOKEN_CHARS or text.lower() in _PLACEHOLDERS:
        raise SettingsError(f"{name} ({path}) holds a placeholder or a token under 16 characters")
    return Secret(text)


def read_coordinator_key(path: Path) -> Hotkey:
    """Load the coordinator signing key: 32 random bytes written as 64 hex characters."""
    text = _read_private_file(path, "HYPERTRAIN_COORD_KEY_FILE")
    try:
        seed = bytes.fromhex(text.removeprefix("0x"))
    except ValueError:
        raise SettingsError(f"HYPERTRAIN_COORD_KEY_FILE ({path}) is not hex") from None
    if len(seed) != 32:
        raise SettingsError(
            f"HYPERTRAIN_COORD_KEY_FILE ({path}) holds {len(seed)} bytes, expected 32"
        )
    return Hotkey.from_seed(seed)


def _read_private_file(path: Path, name: str) -> str:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise SettingsError(f"{name} ({path}) does not exist") from None
    except OSError as exc:
        raise SettingsError(f"{name} ({path}) cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SettingsError(f"{name} ({path}) is not a regular file")
    if info.st_mode & 0o044:
        raise SettingsError(f"{name} ({path}) is readable by group or others; run chmod 600 on it")
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{name} ({path}) cannot be read as text: {exc}") from None
    if not text:
        raise SettingsError(f"{name} ({path}) is empty")
    return text


def settings_from_env(env: Mapping[str, str] | None = None) -> Settings:
    """Build :class:`Settings` from environment variables (``os.environ`` by default)."""
    e = os.environ if env is None else env
    state_dir = _require(e, "CHALLENGE_STATE_DIR")
    source = e.get("HYPERTRAIN_METAGRAPH_SOURCE", "master")
    if source not in ("master", "file", "chain"):
        raise SettingsError(f"HYPERTRAIN_METAGRAPH_SOURCE {source!r} is not master, file or chain")
    return Settings(
        slug=e.get("CHALLENGE_SLUG", "hypertrain"),
        state_dir=Path(state_dir),
        internal_token=read_token_file(
            Path(_require(e, "CHALLENGE_INTERNAL_TOKEN_FILE")), "CHALLENGE_INTERNAL_TOKEN_FILE"
        ),
        coordinator_key=read_coordinator_key(Path(_require(e, "HYPERTRAIN_COORD_KEY_FILE"))),
        admin_token=_optional_token(e, "CHALLENGE_ADMIN_TOKEN_FILE"),
        worker_token=_optional_token(e, "CHALLENGE_WORKER_TOKEN_FILE"),
        master_url=e.get("CHALLENGE_MASTER_URL") or None,
        netuid=_int(e, "CHALLENGE_NETUID", 100),
        metagraph_source=source,  # type: ignore[arg-type]
        metagraph_file=Path(e["HYPERTRAIN_METAGRAPH_FILE"])
        if e.get("HYPERTRAIN_METAGRAPH_FILE")
        else None,
        metagraph_refresh_s=_float(e, "HYPERTRAIN_METAGRAPH_REFRESH_S", 60.0),
        chain_network=e.get("HYPERTRAIN_CHAIN_NETWORK", "finney"),
        beacon_urls=_csv(e.get("HYPERTRAIN_BEACON_URLS")) or DEFAULT_BEACON_URLS,
        beacon_info_file=Path(e["HYPERTRAIN_BEACON_INFO_FILE"])
        if e.get("HYPERTRAIN_BEACON_INFO_FILE")
        else None,
        beacon_poll_s=_float(e, "HYPERTRAIN_BEACON_POLL_S", 1.0),
        worker_hotkeys=_hotkeys(e.get("HYPERTRAIN_WORKER_HOTKEYS")),
    )


def _require(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise SettingsError(f"{name} must be set (see docs/operator.md)")
    return value


def _optional_token(env: Mapping[str, str], name: str) -> Secret | None:
    value = env.get(name)
    return read_token_file(Path(value), name) if value else None


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    try:
        value = int(env.get(name, str(default)))
    except ValueError:
        raise SettingsError(f"{name} must be an integer") from None
    if value < 0:
        raise SettingsError(f"{name} must not be negative")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    try:
        value = float(env.get(name, str(default)))
    except ValueError:
        raise SettingsError(f"{name} must be a number") from None
    if not 0 < value < 1e6:
        raise SettingsError(f"{name} must be a positive number of seconds")
    return value


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip().rstrip("/") for part in (value or "").split(",") if part.strip())


def _hotkeys(value: str | None) -> frozenset[str]:
    keys = _csv(value)
    for key in keys:
        try:
            ss58_decode(key)
        except ValueError as exc:
            raise SettingsError(f"HYPERTRAIN_WORKER_HOTKEYS: {exc}") from None
    return frozenset(keys)
