"""miner.toml: where the service, relay, dataset and keys are, plus flag overrides.

Every key is optional in the file and can be given (or overridden) by a flag; see
docs/miner.md for a commented example. Keys come from the standard Bittensor wallet
layout (``<wallet_path>/<wallet>/hotkeys/<hotkey>``) or from an explicit key file.
:class:`MinerConfig` is a strict pydantic dataclass: a value of the wrong type or an
unknown key is refused with a :class:`ConfigError` naming the setting.
"""

from __future__ import annotations

import argparse
import tomllib
from dataclasses import fields, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, ValidationError
from pydantic.dataclasses import dataclass

from hypertrain.miner.errors import ConfigError
from hypertrain.protocol.identity import (
    DEFAULT_WALLET_PATH,
    Hotkey,
    load_key_file,
    wallet_hotkey_path,
)


@dataclass(frozen=True, slots=True, config=ConfigDict(extra="forbid", strict=True))
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
    region: str = ""  # where the island runs, shown on the dashboard (optional)
    micro_batches: int = 0  # per step per rank in the join layout; 0 = the run's default
    ranks: int = 0  # island processes on this host (torchrun); 0 = one per admitted rank
    zero1: int = 0  # 1 = shard the optimizer state over the ranks (same bytes, less memory)
    ep: int = 1  # expert-parallel degree of an MoE island's join layout (same bytes)
    torchrun_args: str = ""  # extra torchrun options, e.g. a multi-host rendezvous
    poll_s: float = 1.0
    expiry_margin: int = 50  # beacon rounds an upload or commit envelope stays valid
    # admission challenges `join` answers at most: a late answer is tried again, fresh
    join_attempts: Annotated[int, Field(ge=1, le=100)] = 3

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

    def round_dir(self, index: int) -> Path:
        return Path(self.state_dir) / self.run_id / f"round-{index}"


_NAMES = frozenset(f.name for f in fields(MinerConfig))

# Settings a command-line flag may override, with the flag's help text.
FLAGS = (
    ("service_url", "challenge service base URL"),
    ("relay_url", "relay base URL"),
    ("run_id", "run to take part in"),
    ("dataset_dir", "directory of the prepared dataset (dataset.json)"),
    ("state_dir", "where checkpoints and round files are kept"),
    ("wallet", "Bittensor wallet name"),
    ("hotkey", "hotkey name inside the wallet"),
    ("wallet_path", "root of the Bittensor wallets"),
    ("key_file", "explicit hotkey file (instead of wallet/hotkey)"),
    ("coordinator", "pinned coordinator SS58 address"),
    ("device", "torch device to train on (cpu, cuda:0)"),
)


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
    unknown = sorted(set(values) - _NAMES)
    if unknown:
        raise ConfigError(f"unknown setting(s) in miner config: {', '.join(unknown)}")
    try:
        config = replace(MinerConfig(), **values)
    except ValidationError as exc:
        problems = [
            f"setting {'.'.join(str(p) for p in e['loc'])}: {e['msg']}, got {e['input']!r}"
            for e in exc.errors()
        ]
        raise ConfigError("; ".join(problems)) from None
    return config


def config_from_args(args: argparse.Namespace) -> MinerConfig:
    """The config of ``--config`` with the command's flags applied on top."""
    overrides: dict[str, Any] = {name: getattr(args, name, None) for name, _ in FLAGS}
    overrides["endpoint"] = getattr(args, "endpoint", None)
    overrides["region"] = getattr(args, "region", None)
    overrides["micro_batches"] = getattr(args, "micro_batches", None)
    overrides["join_attempts"] = getattr(args, "join_attempts", None)
    return load_config(getattr(args, "config", None), overrides)


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
