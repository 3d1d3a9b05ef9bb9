"""Service settings, read once from the environment (see docs/operator.md for every name).

Secrets never travel in the environment or on the command line: the environment
names *files*. A token file is refused when it is missing, empty, a placeholder or
readable by group or others; the coordinator key file must hold 32 bytes as hex
(what ``openssl rand -hex 32`` writes). Tokens are kept in :class:`Secret` (a pydantic
``SecretStr``), whose ``repr`` hides the value so it cannot leak into a log line or a
traceback. The environment is parsed by :class:`ServiceEnv` (pydantic-settings): values
of the wrong type are refused, and so is any ``CHALLENGE_*`` variable, or any variable
of the service's ``HYPERTRAIN_*`` families, that the service does not know (a misspelt
name is an error, never silently ignored).
"""

from __future__ import annotations

import hmac
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from hypertrain.challenge.deadlines import (
    DEFAULT_DEADLINES,
    DeadlineTable,
    load_deadlines,
)
from hypertrain.challenge.errors import SettingsError
from hypertrain.protocol.identity import Hotkey, ss58_decode

DEFAULT_BEACON_URLS: Final = ("https://api.drand.sh", "https://drand.cloudflare.com")
MIN_TOKEN_CHARS: Final = 16
_PLACEHOLDERS: Final = frozenset({"changeme", "change-me", "secret", "token", "password", "xxx"})

MetagraphSource = Literal["master", "file", "chain"]


class Secret(SecretStr):
    """A bearer token; compares in constant time and never prints its value."""

    def matches(self, presented: str) -> bool:
        mine = self.get_secret_value().encode("utf-8")
        return hmac.compare_digest(mine, presented.encode("utf-8", "replace"))

    def reveal(self) -> str:
        return self.get_secret_value()


class ServiceEnv(BaseSettings):
    """The service's environment variables, typed (names are the fields, upper case)."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True, env_ignore_empty=True)

    challenge_state_dir: Path
    challenge_internal_token_file: Path
    challenge_admin_token_file: Path | None = None
    challenge_worker_token_file: Path | None = None
    challenge_slug: str = "hypertrain"
    challenge_master_url: str | None = None
    challenge_netuid: int = Field(default=100, ge=0)
    hypertrain_coord_key_file: Path
    hypertrain_metagraph_source: MetagraphSource = "master"
    hypertrain_metagraph_file: Path | None = None
    hypertrain_metagraph_refresh_s: float = Field(default=60.0, gt=0, lt=1e6)
    hypertrain_chain_network: str = "finney"
    hypertrain_beacon_urls: str = ""
    hypertrain_beacon_info_file: Path | None = None
    hypertrain_beacon_poll_s: float = Field(default=1.0, gt=0, lt=1e6)
    hypertrain_worker_hotkeys: str = ""
    hypertrain_aggregator_hotkeys: str = ""
    hypertrain_admission_deadlines_file: Path | None = None
    hypertrain_tape_witnesses: int = Field(default=1, ge=0, le=64)
    hypertrain_witness_hotkeys: str = ""
    hypertrain_admission_backoff_rounds: int = Field(default=20, ge=0, le=1_000_000)
    hypertrain_evaluator_hotkeys: str = ""
    hypertrain_standby_hotkeys: str = ""
    hypertrain_witness_wait_rounds: int = Field(default=20, ge=1, le=1_000_000)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only what the caller passes (see :func:`settings_from_env`); no .env files."""
        return (init_settings,)


# Prefixes of the variable families the service reads; an unknown name in one is refused.
_FAMILIES: Final = (
    "CHALLENGE_",
    "HYPERTRAIN_BEACON_",
    "HYPERTRAIN_METAGRAPH_",
    "HYPERTRAIN_COORD_",
    "HYPERTRAIN_WORKER_",
    "HYPERTRAIN_AGGREGATOR_",
    "HYPERTRAIN_EVALUATOR_",
    "HYPERTRAIN_CHAIN_",
    "HYPERTRAIN_ADMISSION_",
    "HYPERTRAIN_TAPE_",
    "HYPERTRAIN_WITNESS_",
    "HYPERTRAIN_STANDBY_",
)


def parse_env(env: Mapping[str, str]) -> ServiceEnv:
    """The service's variables of ``env``, validated; unknown names in its families refused."""
    known = {name.upper() for name in ServiceEnv.model_fields}
    unknown = sorted(k for k in env if k.startswith(_FAMILIES) and k not in known)
    if unknown:
        raise SettingsError(f"unknown setting(s) in the environment: {', '.join(unknown)}")
    values = {k.lower(): v for k, v in env.items() if k in known and v}
    try:
        return ServiceEnv.model_validate(values)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc']).upper()}: {e['msg']}" for e in exc.errors()
        ]
        raise SettingsError("; ".join(problems) + " (see docs/operator.md)") from None


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
    # the only keys that may sign merge tapes (empty: no tape is accepted, rounds never merge)
    aggregator_hotkeys: frozenset[str] = frozenset()
    # agreeing witness attestations a merged round's tape needs before it settles; 0 (no
    # witness: rounds settle on the aggregator's word) only on a local network
    tape_witnesses: int = 1
    # the only keys whose attestations count; required off a local network (on one, empty:
    # any registered key holding no other role)
    witness_hotkeys: frozenset[str] = frozenset()
    # competition evaluators of specs that name none: a role of their own, never auditors
    evaluator_hotkeys: frozenset[str] = frozenset()
    # standby jurors: worker keys that re-audit only; the audit phase's early close never
    # waits for them (challenge.rounds.pace), every jury still counts them
    standby_hotkeys: frozenset[str] = frozenset()
    # beacon rounds after a merge tape's arrival the next round waits for its witnesses
    witness_wait_rounds: int = 20
    max_body_bytes: int = 1 << 20
    # admission answer deadlines per device class (deadlines.py)
    admission_deadlines: DeadlineTable = DEFAULT_DEADLINES
    # rounds a refused island waits before it may join again, doubled per refusal
    admission_backoff_rounds: int = 20

    def __post_init__(self) -> None:
        if not self.slug or not self.slug.replace("-", "").replace("_", "").isalnum():
            raise SettingsError(f"CHALLENGE_SLUG {self.slug!r} must be alphanumeric (- and _ ok)")
        if self.metagraph_source == "master" and not self.master_url:
            raise SettingsError("CHALLENGE_MASTER_URL is required with the master metagraph")
        if self.metagraph_source == "file" and self.metagraph_file is None:
            raise SettingsError("HYPERTRAIN_METAGRAPH_FILE is required with the file metagraph")
        if not self.beacon_urls:
            raise SettingsError("HYPERTRAIN_BEACON_URLS names no endpoint")
        _witnesses_required(self)
        if self.witness_hotkeys and self.tape_witnesses > len(self.witness_hotkeys):
            raise SettingsError(
                f"HYPERTRAIN_TAPE_WITNESSES={self.tape_witnesses} needs more keys than the"
                f" {len(self.witness_hotkeys)} of HYPERTRAIN_WITNESS_HOTKEYS: no round would settle"
            )
        if self.standby_hotkeys - self.worker_hotkeys:
            raise SettingsError(
                "HYPERTRAIN_STANDBY_HOTKEYS lists a key that is not in HYPERTRAIN_WORKER_HOTKEYS"
                " (a standby juror is an auditor that re-audits only)"
            )
        _one_role_per_key(
            {
                "HYPERTRAIN_AGGREGATOR_HOTKEYS": self.aggregator_hotkeys,
                "HYPERTRAIN_WITNESS_HOTKEYS": self.witness_hotkeys,
                "HYPERTRAIN_EVALUATOR_HOTKEYS": self.evaluator_hotkeys,
            }
        )


def _witnesses_required(s: Settings) -> None:
    """Off a local network (any metagraph but a file) a merged round settles only on a
    tape the operator's witnesses recomputed: no witness, or none named, is refused
    (docs/threats.md, "Tape witnesses"). A local network may opt out explicitly."""
    if s.metagraph_source == "file":
        return
    if s.tape_witnesses <= 0:
        raise SettingsError(
            "HYPERTRAIN_TAPE_WITNESSES=0 settles rounds on the aggregator's tape alone: only a"
            " local network (HYPERTRAIN_METAGRAPH_SOURCE=file) may turn tape witnesses off"
        )
    if not s.witness_hotkeys:
        raise SettingsError(
            "HYPERTRAIN_WITNESS_HOTKEYS names no tape witness: a merged round settles only once"
            f" {s.tape_witnesses} witness(es) recomputed its tape; name the witness keys you"
            " trust (hypertrain keys address KEYFILE prints one; see docs/operator.md)"
        )


def _one_role_per_key(lists: Mapping[str, frozenset[str]]) -> None:
    """Refuse a key named in two role lists: it could never act in either (one key, one
    role: docs/threats.md, "Roles"). The worker list may hold the aggregator keys."""
    names = sorted(lists)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            both = sorted(lists[first] & lists[second])
            if both:
                raise SettingsError(
                    f"{', '.join(both)} named in both {first} and {second}: a key holds one role"
                )


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
    e = parse_env(os.environ if env is None else env)
    return Settings(
        slug=e.challenge_slug,
        state_dir=e.challenge_state_dir,
        internal_token=read_token_file(
            e.challenge_internal_token_file, "CHALLENGE_INTERNAL_TOKEN_FILE"
        ),
        coordinator_key=read_coordinator_key(e.hypertrain_coord_key_file),
        admin_token=_optional_token(e.challenge_admin_token_file, "CHALLENGE_ADMIN_TOKEN_FILE"),
        worker_token=_optional_token(e.challenge_worker_token_file, "CHALLENGE_WORKER_TOKEN_FILE"),
        master_url=e.challenge_master_url,
        netuid=e.challenge_netuid,
        metagraph_source=e.hypertrain_metagraph_source,
        metagraph_file=e.hypertrain_metagraph_file,
        metagraph_refresh_s=e.hypertrain_metagraph_refresh_s,
        chain_network=e.hypertrain_chain_network,
        beacon_urls=_csv(e.hypertrain_beacon_urls) or DEFAULT_BEACON_URLS,
        beacon_info_file=e.hypertrain_beacon_info_file,
        beacon_poll_s=e.hypertrain_beacon_poll_s,
        worker_hotkeys=_hotkeys("HYPERTRAIN_WORKER_HOTKEYS", e.hypertrain_worker_hotkeys),
        aggregator_hotkeys=_hotkeys(
            "HYPERTRAIN_AGGREGATOR_HOTKEYS", e.hypertrain_aggregator_hotkeys
        ),
        admission_deadlines=_deadlines(e.hypertrain_admission_deadlines_file),
        tape_witnesses=e.hypertrain_tape_witnesses,
        witness_hotkeys=_hotkeys("HYPERTRAIN_WITNESS_HOTKEYS", e.hypertrain_witness_hotkeys),
        admission_backoff_rounds=e.hypertrain_admission_backoff_rounds,
        evaluator_hotkeys=_hotkeys("HYPERTRAIN_EVALUATOR_HOTKEYS", e.hypertrain_evaluator_hotkeys),
        witness_wait_rounds=e.hypertrain_witness_wait_rounds,
        standby_hotkeys=_hotkeys("HYPERTRAIN_STANDBY_HOTKEYS", e.hypertrain_standby_hotkeys),
    )


def _deadlines(path: Path | None) -> DeadlineTable:
    """The operator's deadline table, or the documented defaults."""
    if path is None:
        return DEFAULT_DEADLINES
    try:
        return load_deadlines(path)
    except ValueError as exc:
        raise SettingsError(f"HYPERTRAIN_ADMISSION_DEADLINES_FILE: {exc}") from None


def _optional_token(path: Path | None, name: str) -> Secret | None:
    return read_token_file(path, name) if path is not None else None


def _csv(value: str | None) -> tuple[str, ...]:
    return tuple(part.strip().rstrip("/") for part in (value or "").split(",") if part.strip())


def _hotkeys(name: str, value: str | None) -> frozenset[str]:
    """The SS58 keys of the comma-separated variable ``name`` (an invalid one is refused)."""
    keys = _csv(value)
    for key in keys:
        try:
            ss58_decode(key)
        except ValueError as exc:
            raise SettingsError(f"{name}: {exc}") from None
    return frozenset(keys)
