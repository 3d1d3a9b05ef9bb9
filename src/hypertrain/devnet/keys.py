"""Every secret and identity of a devnet, generated fresh in its state directory (or
read back from it when a stopped devnet resumes: :func:`load`).

Bearer tokens (internal, admin, worker) and the coordinator seed are random and
written with mode 600, as the service requires. Islands, the auditor and the
aggregator get sr25519 hotkeys in wallet key files. The metagraph snapshot lists
the islands' hotkeys, so the service admits exactly the devnet's miners.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from hypertrain.protocol.identity import Hotkey, load_key_file, write_key_file


@dataclass(frozen=True, slots=True)
class Identity:
    name: str
    key: Hotkey
    key_file: Path

    @property
    def ss58(self) -> str:
        return self.key.ss58_address


@dataclass(frozen=True, slots=True)
class Secrets:
    internal_token: Path
    admin_token: Path
    worker_token: Path
    coordinator_seed: Path
    coordinator: Identity
    islands: tuple[Identity, ...]  # honest islands first, the honeypot last
    auditor: Identity
    aggregator: Identity
    witness: Identity  # the tape witness: registered, it holds no other role
    metagraph: Path
    jurors: tuple[Identity, ...] = ()  # standby jurors (the rollback scenario): re-audit only

    def token(self, path: Path) -> str:
        return path.read_text(encoding="utf-8").strip()


def _private(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _identity(directory: Path, name: str, seed: bytes | None = None) -> Identity:
    path = directory / f"{name}.json"
    key = write_key_file(seed or secrets.token_bytes(32), path)
    path.chmod(0o600)
    return Identity(name, key, path)


def generate(directory: Path, islands: int, jurors: int = 0) -> Secrets:
    """Fresh tokens, keys and a metagraph snapshot for ``islands`` + 1 (honeypot) miners,
    and ``jurors`` standby jurors' keys (workers, like the auditor: not registered)."""
    directory.mkdir(parents=True, exist_ok=True)
    tokens = {
        n: _private(directory / f"{n}.token", secrets.token_hex(24))
        for n in ("internal", "admin", "worker")
    }
    seed = secrets.token_bytes(32)
    coord_seed = _private(directory / "coordinator.key", seed.hex() + "\n")
    # One name everywhere: island-<uid>, the uid the metagraph gives it (the
    # dashboard names islands the same way); the honeypot is the last island.
    names = [f"island-{i + 1}" for i in range(islands + 1)]
    members = tuple(_identity(directory, name) for name in names)
    witness = _identity(directory, "witness")  # registered after the islands
    metagraph = directory / "metagraph.json"
    doc = {
        "epoch": 1,
        "block": 1,
        "netuid": 100,
        "hotkeys": {m.ss58: uid for uid, m in enumerate((*members, witness), start=1)},
    }
    metagraph.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return Secrets(
        internal_token=tokens["internal"],
        admin_token=tokens["admin"],
        worker_token=tokens["worker"],
        coordinator_seed=coord_seed,
        coordinator=_identity(directory, "coordinator", seed),
        islands=members,
        auditor=_identity(directory, "auditor"),
        aggregator=_identity(directory, "aggregator"),
        witness=witness,
        metagraph=metagraph,
        jurors=tuple(_identity(directory, f"juror-{i + 1}") for i in range(jurors)),
    )


def load(directory: Path) -> Secrets:
    """The secrets :func:`generate` wrote into ``directory``, read back (a resumed devnet
    keeps every identity, so the service, relay and records still know them)."""

    def ident(name: str) -> Identity:
        path = directory / f"{name}.json"
        return Identity(name, load_key_file(path), path)

    def numbered(prefix: str) -> tuple[Identity, ...]:
        count = len(list(directory.glob(f"{prefix}-*.json")))
        return tuple(ident(f"{prefix}-{i + 1}") for i in range(count))

    islands = numbered("island")
    if not islands:
        raise FileNotFoundError(f"no devnet secrets in {directory}")
    return Secrets(
        internal_token=directory / "internal.token",
        admin_token=directory / "admin.token",
        worker_token=directory / "worker.token",
        coordinator_seed=directory / "coordinator.key",
        coordinator=ident("coordinator"),
        islands=islands,
        auditor=ident("auditor"),
        aggregator=ident("aggregator"),
        witness=ident("witness"),
        metagraph=directory / "metagraph.json",
        jurors=numbered("juror"),
    )
