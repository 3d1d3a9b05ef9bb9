"""Test helpers for the challenge service: settings on disk, a ledger fake, a stepped beacon."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypertrain.challenge.errors import BondMissingError
from hypertrain.challenge.ports import BeaconRound, WeightsAnswer
from hypertrain.challenge.settings import Settings, read_coordinator_key, read_token_file
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey

DEVICE_CLASS = "cpu:test"
GOOD_HASH = "ab" * 32
# H = 8 steps of 5-sample micro-batches of 26 tokens (25 predicted): an island trains
# 1000 tokens per micro-batch per step in its layout, so a 1x1 island commits 1000.
MICRO_BATCH_SIZE = 5
TOKENS_PER_MICRO_BATCH = 8 * MICRO_BATCH_SIZE * 25
TOKENS = {"internal": "i" * 32, "admin": "a" * 32, "worker": "w" * 32}

# the aggregator signs the merge tapes: never a key that signs verdicts in the run
AGGREGATOR = Hotkey.from_seed(b"\x5a" * 32)


def write_private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def write_secrets(directory: Path) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    files = {name: write_private(directory / f"{name}.token", tok) for name, tok in TOKENS.items()}
    files["coord"] = write_private(directory / "coord.key", secrets.token_hex(32) + "\n")
    return files


def write_metagraph(path: Path, hotkeys: list[str], epoch: int = 1) -> Path:
    doc = {
        "epoch": epoch,
        "block": 100,
        "netuid": 100,
        "hotkeys": {h: i for i, h in enumerate(hotkeys)},
    }
    path.write_text(json.dumps(doc))
    return path


def make_settings(tmp: Path, registered: list[str], **overrides: Any) -> Settings:
    files = write_secrets(tmp / "secrets")
    metagraph = write_metagraph(tmp / "metagraph.json", registered)
    values: dict[str, Any] = {
        "state_dir": tmp / "state",
        "internal_token": read_token_file(files["internal"], "internal"),
        "admin_token": read_token_file(files["admin"], "admin"),
        "worker_token": read_token_file(files["worker"], "worker"),
        "coordinator_key": read_coordinator_key(files["coord"]),
        "metagraph_source": "file",
        "metagraph_file": metagraph,
        "beacon_poll_s": 0.05,
        "metagraph_refresh_s": 0.2,
        # the service takes tapes only from named aggregator keys (facts/roles.py)
        "aggregator_hotkeys": frozenset({AGGREGATOR.ss58_address}),
        # a local test network's explicit opt-out of tape witnesses (settings.py); tests of
        # the witnessed rule pass tape_witnesses and their witness keys
        "tape_witnesses": 0,
    }
    values.update(overrides)
    return Settings(**values)


def manifest_doc(run_id: str = "run-1", **audit: Any) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "seed": 7,
        "model": {
            "vocab_size": 256,
            "d_model": 16,
            "num_layers": 1,
            "num_heads": 2,
            "head_dim": 8,
            "ffn_hidden": 32,
            "context_length": 32,
        },
        "round": {
            "inner_steps": 8,
            "checkpoint_interval": 2,
            "layout": {"micro_batch_size": MICRO_BATCH_SIZE},
            "layout_limits": {"max_dp_ranks": 2, "max_micro_batches": 4},
            "commit_window_rounds": 3,
            "audit_window_rounds": 2,
            "dispute_window_rounds": 2,
        },
        "data": {
            "dataset_root": "11" * 32,
            "descriptor_sha256": "22" * 32,
            "tokenizer_sha256": "33" * 32,
            "sample_count": 100,
            "seq_len": 26,
        },
        "audit": {"rate": 0.5, "segments": 2, "probation_rounds": 1, **audit},
        "determinism": {"torch_version": "2.13.0", "num_threads": 1, "device_class": DEVICE_CLASS},
        "selfcheck_reference": {DEVICE_CLASS: GOOD_HASH},
        # a closed network: admitted on the self-reported hash (the challenge has its tests)
        "admission": {"challenge": False},
    }


def join_body(
    workload_hash: str = GOOD_HASH, devices: int = 1, micro_batches: int = 1
) -> dict[str, Any]:
    return {
        "devices": [
            {
                "index": i,
                "name": "test",
                "device_class": DEVICE_CLASS,
                "memory_bytes": 1 << 20,  # the smallest claim (a 1 MiB table)
                "workload_hash": workload_hash,
            }
            for i in range(devices)
        ],
        "layout": {
            "dp_ranks": devices,
            "micro_batches": micro_batches,
            "micro_batch_size": MICRO_BATCH_SIZE,
        },
    }


def commit_body(
    round_index: int, tokens: int = TOKENS_PER_MICRO_BATCH, loss: float = 3.5, island: str = ""
) -> dict[str, Any]:
    """A commit body; islands committing the same one share an update and a root (an
    exact copy, which audits every holder): pass ``island`` for a body of its own."""
    digest = hashlib.sha256(f"{tokens}{':' + island if island else ''}".encode()).hexdigest()
    return {
        "round": round_index,
        "checkpoint_root": digest,
        "leaf_count": 5,
        "update_sha256": digest,
        "update_bytes": 4096,
        "tokens": tokens,
        "update_url": "http://relay/blob",
        "train_loss": loss,
    }


def signed(
    key: Hotkey, domain: str, body: dict[str, Any], run_id: str = "run-1", expiry: int = 50_000
) -> dict[str, Any]:
    return seal(key, domain=domain, run_id=run_id, body=body, expiry_round=expiry).model_dump()


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@dataclass
class SteppedBeacon:
    """A beacon source the test advances by hand (unit tests; the full round uses drand)."""

    round: int = 100

    def _at(self, number: int) -> BeaconRound:
        rnd = hashlib.sha256(f"r{number}".encode()).hexdigest()
        return BeaconRound(number, rnd, rnd + rnd)

    def latest(self) -> BeaconRound:
        return self._at(self.round)

    def get(self, round_number: int) -> BeaconRound:
        if round_number > self.round:
            raise ValueError(f"round {round_number} is in the future")
        return self._at(round_number)


@dataclass
class LaggingBeacon(SteppedBeacon):
    """Verified rounds stop at ``round`` while the chain's schedule says ``due``."""

    due: int = 100

    def due_round(self) -> int:
        return max(self.due, self.round)


@dataclass
class FakeLedger:
    """Records calls; pays each settled round's tokens as weights."""

    runs: dict[str, tuple[int, int]] = field(default_factory=dict)
    settled: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    held: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    faults: list[tuple[str, int, str]] = field(default_factory=list)
    deregistered: list[tuple[str, int]] = field(default_factory=list)
    released: list[tuple[str, int, str]] = field(default_factory=list)
    bonds: dict[str, tuple[str, int, str]] = field(default_factory=dict)  # id -> (hk, amt, state)
    weight_calls: int = 0

    def create_run(self, run_id: str, *, pool_per_round: int, vesting_rounds: int) -> None:
        self.runs[run_id] = (pool_per_round, vesting_rounds)

    def settle_round(
        self,
        run_id: str,
        round_index: int,
        accepted: Mapping[str, int],
        epoch: int,
        held: Mapping[str, int] | None = None,
    ) -> None:
        key = (run_id, round_index)
        if key in self.settled:
            raise ValueError("already settled")
        self.settled[key] = dict(accepted)
        self.held[key] = dict(held or {})

    def record_fault(
        self, run_id: str, round_index: int, hotkey: str, reason: str, epoch: int
    ) -> int:
        assert (run_id, round_index) in self.settled, "the ledger faults only final rounds"
        self.faults.append((run_id, round_index, hotkey))
        return 0

    def release_hold(
        self, run_id: str, round_index: int, hotkey: str, epoch: int, until: int = 0
    ) -> bool:
        self.released.append((run_id, round_index, hotkey))
        return True

    def deregister(self, hotkey: str, epoch: int) -> int:
        self.deregistered.append((hotkey, epoch))
        return 0

    def lock_bond(self, run_id: str, hotkey: str, dispute_id: str, amount: int, epoch: int) -> int:
        self.bonds[dispute_id] = (hotkey, amount, "locked")
        return len(self.bonds)

    def free_escrow(self, run_id: str, hotkey: str) -> int:
        escrow = self.balances(run_id, [hotkey]).get(hotkey, {}).get("escrow", 0)
        locked = sum(a for h, a, s in self.bonds.values() if h == hotkey and s == "locked")
        return escrow - locked

    def settle_bond(self, run_id: str, dispute_id: str, won: bool, epoch: int) -> int:
        if dispute_id not in self.bonds:  # the port's contract: typed, never a silent 0
            raise BondMissingError(f"dispute {dispute_id[:16]} has no bond")
        hotkey, amount, state = self.bonds[dispute_id]
        if state != "locked":
            return 0
        self.bonds[dispute_id] = (hotkey, amount, "returned" if won else "burned")
        return amount

    def get_weights(self, epoch: int, registered: Collection[str]) -> WeightsAnswer:
        self.weight_calls += 1
        weights: dict[str, int | float] = {}
        for accepted in self.settled.values():
            for hotkey, tokens in accepted.items():
                if hotkey in registered:
                    weights[hotkey] = weights.get(hotkey, 0) + tokens
        return WeightsAnswer(weights, sum(weights.values()) or 1)

    def balances(self, run_id: str, hotkeys: list[str]) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for (run, _), accepted in self.settled.items():
            for hotkey, tokens in accepted.items():
                if run == run_id:
                    bal = out.setdefault(
                        hotkey, dict.fromkeys(("escrow", "held", "vested", "paid", "burned"), 0)
                    )
                    bal["escrow"] += tokens
        return out


def aggregator_split(
    client: Any, run_id: str, index: int, hotkeys: Collection[str]
) -> dict[str, Any]:
    """A tape's ``included`` / ``excluded`` for ``hotkeys`` as the aggregator's collection
    decides them from the public round record: a non-``match`` verdict excludes
    (``audit_mismatch``), an assigned audit without a verdict too (``audit_pending``)."""
    detail = client.get(f"/v1/runs/{run_id}/rounds/{index}").json()
    results: dict[str, set[str]] = {}
    for v in detail["verdicts"]:
        body = v["envelope"]["body"]
        results.setdefault(body["hotkey"], set()).add(body["result"])
    assigned = {a["body"]["hotkey"] for a in detail["assignments"]}
    excluded: dict[str, str] = {}
    for hotkey in hotkeys:
        if results.get(hotkey, {"match"}) != {"match"}:
            excluded[hotkey] = "audit_mismatch"
        elif hotkey in assigned and hotkey not in results:
            excluded[hotkey] = "audit_pending"
    return {"included": sorted(set(hotkeys) - excluded.keys()), "excluded": excluded}
