"""miner.toml: where the service, relay, dataset and keys are, plus flag overrides.

Every key is optional in the file and can be given (or overridden) by a flag; see
docs/miner.md for a commented example. Keys come from the standard Bittensor wallet
layout (``<wallet_path>/<wallet>/hotkeys/<hotkey>``) or from an explicit key file.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from hypertrain.auditor.honeypot import Strategy, check_strategy
from hypertrain.miner.errors import ConfigError
from hypertrain.protocol.identity import (
    DEFAULT_WALLET_PATH,
    Hotkey,
    load_key_file,
    wallet_hotkey_path,
)


@dataclass(frozen=True, slots=True)
class MinerConfig:
    service_url: str = ""
    relay_url: str = ""
    run_id: str = ""
    dataset_dir: str = ""
    state_dir: str = "miner-state"
    wallet: str = "default"
    hotkey: str = "default"
    wallet_path: str = DEFAULT_WALLET_PATH
    key_file: str = ""
    coordinator: str = ""  # pinned coordinator SS58; empty = trust the manifest's field
    device: str = "cpu"
    endpoint: str = ""
    micro_batches: int = 0  # per step per rank in the join layout; 0 = the run's default
    ranks: int = 0  # island processes on this host (torchrun); 0 = one per admitted rank
    zero1: int = 0  # 1 = shard the optimizer state over the ranks (same bytes, less memory)
    torchrun_args: str = ""  # extra torchrun options, e.g. a multi-host rendezvous
    honeypot: str = ""
    poll_s: float = 1.0
    expiry_margin: int = 50  # beacon rounds an upload or commit envelope stays valid

    def require(self, *names: str) -> None:
        missing = [n for n in names if not getattr(self, n)]
        if missing:
            flags = ", ".join("--" + n.replace("_", "-") for n in missing)
            raise ConfigError(
                f"missing setting(s) {', '.join(missing)}: set them in miner.toml or pass {flags}"
            )

    def load_key(self) -> Hotkey:
        path = (
            Path(self.key_file)
            if self.key_file
            else wallet_hotkey_path(self.wallet, self.hotkey, self.wallet_path)
        )
        return load_key_file(path.expanduser())

    @property
    def strategy(self) -> Strategy | None:
        return check_strategy(self.honeypot)

    def round_dir(self, index: int) -> Path:
        return Path(self.state_dir) / self.run_id / f"round-{index}"


_TYPES = {f.name: f.type for f in fields(MinerConfig)}


def load_config(path: Path | None, overrides: dict[str, Any] | None = None) -> MinerConfig:
    """Read ``path`` (if given) then apply non-None ``overrides``; refuse unknown keys."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            doc = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
        values.update(_flatten(doc))
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    unknown = sorted(set(values) - set(_TYPES))
    if unknown:
        raise ConfigError(f"unknown setting(s) in miner config: {', '.join(unknown)}")
    for name, value in values.items():
        want = float if _TYPES[name] == "float" else int if _TYPES[name] == "int" else str
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or isinstance(value, bool):
            raise ConfigError(f"setting {name} must be a {want.__name__}, got {value!r}")
        values[name] = value
    config = replace(MinerConfig(), **values)
    config.strategy  # noqa: B018 - validates the honeypot name early
    return config


def _flatten(doc: dict[str, Any]) -> dict[str, Any]:
    """Accept flat keys or the sections [network], [wallet], [data], [node]."""
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            for inner, v in value.items():
                flat[_SECTION_KEYS.get((key, inner)) or inner] = v
        else:
            flat[key] = value
    return flat


_SECTION_KEYS = {("wallet", "name"): "wallet", ("wallet", "path"): "wallet_path"}
