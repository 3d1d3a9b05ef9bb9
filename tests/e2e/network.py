"""What every network test sets up the same way: secrets, the service's environment, the
relay's arguments, miner configs, and the wait until both servers answer.

Each test still decides its own roles, manifest and beacon clock (a gate in front of the
local beacon, or the beacon itself); these helpers only remove the boilerplate around
them, so the tests differ where they really differ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import httpx

from hypertrain.beacon.chain import ChainInfo
from hypertrain.protocol.identity import Hotkey
from tests.e2e.launch import http_ok, wait_for

TOKENS = {"internal": "i" * 32, "admin": "a" * 32, "worker": "w" * 32}


def private(path: Path, text: str) -> Path:
    """A file only its owner may read (token and key files are refused otherwise)."""
    path.write_text(text)
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class Secrets:
    """The service's bearer token files and the coordinator's key file and address."""

    tokens: dict[str, Path]
    coord_key: Path
    coord: str


def write_secrets(root: Path, coord_seed_hex: str = "77" * 32) -> Secrets:
    tokens = {n: private(root / f"{n}.token", t) for n, t in TOKENS.items()}
    coord_key = private(root / "coord.key", coord_seed_hex)
    coord = Hotkey.from_seed(bytes.fromhex(coord_seed_hex)).ss58_address
    return Secrets(tokens, coord_key, coord)


def write_metagraph(path: Path, uids: dict[str, int], block: int = 100) -> None:
    """A metagraph snapshot registering exactly ``uids`` (hotkey -> uid), written
    atomically so a service reading it meanwhile sees the old file or the new one."""
    doc = {"epoch": 1, "block": block, "netuid": 100, "hotkeys": uids}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)


def service_env(
    root: Path, beacon_url: str, secrets: Secrets, workers: list[str], **extra: str
) -> dict[str, str]:
    """``hypertrain challenge serve``'s environment; ``extra`` adds or overrides settings."""
    return {
        "CHALLENGE_STATE_DIR": str(root / "service"),
        "CHALLENGE_INTERNAL_TOKEN_FILE": str(secrets.tokens["internal"]),
        "CHALLENGE_ADMIN_TOKEN_FILE": str(secrets.tokens["admin"]),
        "CHALLENGE_WORKER_TOKEN_FILE": str(secrets.tokens["worker"]),
        "HYPERTRAIN_COORD_KEY_FILE": str(secrets.coord_key),
        "HYPERTRAIN_METAGRAPH_SOURCE": "file",
        "HYPERTRAIN_METAGRAPH_FILE": str(root / "metagraph.json"),
        "HYPERTRAIN_BEACON_URLS": beacon_url,
        "HYPERTRAIN_BEACON_INFO_FILE": str(root / "beacon" / "info.json"),
        "HYPERTRAIN_BEACON_POLL_S": "0.3",
        "HYPERTRAIN_WORKER_HOTKEYS": ",".join(workers),
        "HYPERTRAIN_TAPE_WITNESSES": "0",  # a local network without a witness (opt-out)
        **extra,
    }


def relay_args(root: Path, run_id: str, coord: str, chain: ChainInfo) -> list[str]:
    """``hypertrain relay serve``'s arguments: storage, allow list, coordinator, clock."""
    return [
        *("serve", "--storage", str(root / "blobs"), "--run-id", run_id),
        *("--allow-list", str(root / "allow.json"), "--coordinator", coord),
        *("--beacon-genesis-unix", str(chain.genesis_time)),
        *("--beacon-period-s", str(chain.period_s)),
    ]


def miner_toml(
    root: Path, run_id: str, name: str, urls: tuple[str, str], dataset: Path, poll_s: float = 0.5
) -> Path:
    """A ``miner.toml`` for hotkey ``name`` of the ``e2e`` wallet under ``root/wallets``."""
    service, relay = urls
    path = root / f"{name}.toml"
    path.write_text(
        f'run_id = "{run_id}"\n[network]\nservice_url = "{service}"\nrelay_url = "{relay}"\n'
        f'[wallet]\nname = "e2e"\nhotkey = "{name}"\npath = "{root / "wallets"}"\n'
        f'[data]\ndataset_dir = "{dataset}"\n[node]\nstate_dir = "{root / "state" / name}"\n'
        f"poll_s = {poll_s}\nexpiry_margin = 300\n"
    )
    return path


def wait_servers(service: str, relay: str) -> None:
    """Both servers answer and the service has verified a beacon round."""
    wait_for(
        lambda: http_ok(f"{service}/v1/beacon") and http_ok(f"{relay}/health"),
        60,
        "service and relay",
    )
    wait_for(lambda: httpx.get(f"{service}/v1/beacon").json()["round"], 30, "a beacon round")
