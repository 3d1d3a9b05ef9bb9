"""The run manifest and the command lines of the islands, honeypot, auditor, aggregator and
tape witness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.devnet.config import (
    AUDIT_SEGMENTS,
    MICRO_BATCH_SIZE,
    ROLLBACK_ANSWER_ROUNDS,
    ROLLBACK_CLOCK_ROUNDS,
    DevnetConfig,
)
from hypertrain.devnet.keys import Identity, Secrets
from hypertrain.devnet.procs import honeypot_island_cmd, hypertrain_cmd, miner_cmd, python_cmd
from hypertrain.protocol.deadlines import answer_floor_rounds
from hypertrain.protocol.manifest import DisputeSpec, RunManifest
from hypertrain.protocol.recipe import COMPRESSION, INNER_STATE, OUTER_STEP

RUN_ID = "devnet"
STEADY_AUDIT_RATE = 0.1  # the manifest default (protocol.manifest.AuditSpec)
REGION = "this machine (devnet)"  # every island runs here; shown on the dashboard
ISLAND_READY = '"event": "started"'  # the miner's first JSON line, once it follows the run
# The rollback scenario's disputes: no bond (a devnet island holds little escrow), time
# for a busy machine's replays, and no referee (the lying auditor answers from its honest
# replay, so the game is overturned before any operation is contested).
ROLLBACK_DISPUTES: dict[str, Any] = {
    "bond": 0,
    "answer_rounds": ROLLBACK_ANSWER_ROUNDS,
    "clock_rounds": ROLLBACK_CLOCK_ROUNDS,
}


def manifest_doc(cfg: DevnetConfig, dataset_dir: Path, coordinator: str) -> dict[str, Any]:
    """The devnet's run manifest: probation until the honeypot's first cheat, then the
    default audit rate; merges broadcast the outer step."""
    import torch

    from hypertrain.miner.admission import device_class, workload_hash
    from hypertrain.trainer.determinism import configure_determinism
    from hypertrain.trainer.presets import get_preset, with_vocab

    dataset = Dataset(dataset_dir / DESCRIPTOR_NAME)
    spec = with_vocab(get_preset(cfg.preset), dataset.descriptor.vocab_size)
    spec = spec.model_copy(update={"context_length": max(spec.context_length, cfg.seq_len)})
    cpu = torch.device("cpu")
    warm = cfg.warm_start
    total = cfg.rounds * cfg.inner_steps + (warm["steps"] if warm else 0)
    doc: dict[str, Any] = {
        "run_id": RUN_ID,
        "seed": cfg.seed,
        "model": spec.model_dump(mode="json"),
        # the schedule plans exactly the warm start and the devnet's rounds: the
        # dashboard's total is --rounds
        "inner": {
            **INNER_STATE,
            "name": cfg.optimizer,
            "warmup_steps": min(2, total),
            "total_steps": total,
        },
        "round": {
            "inner_steps": cfg.inner_steps,
            "checkpoint_interval": cfg.checkpoint_interval,
            "commit_window_rounds": cfg.windows[0],
            "audit_window_rounds": cfg.windows[1],
            "dispute_window_rounds": cfg.dispute_window_rounds,
            "layout": {"micro_batch_size": MICRO_BATCH_SIZE},
            "layout_limits": {"max_dp_ranks": 1, "max_micro_batches": cfg.max_micro_batches},
            **({"overlap": True} if cfg.overlap else {}),
        },
        "data": dataset.descriptor.data_spec().model_dump(mode="json"),
        # Probation (every island audited every round) covers the honeypot's honest
        # rounds and its first cheat, so the cheat is always caught; after it, islands are
        # audited at the manifest's default rate: the steady state the traffic shows.
        "audit": {
            "rate": STEADY_AUDIT_RATE,
            "segments": min(AUDIT_SEGMENTS, cfg.segments),
            "probation_rounds": cfg.probation_rounds,
        },
        # The new-run outer step (plain averaging, the 4-bit broadcast) and codec
        "outer": dict(OUTER_STEP),
        "compression": dict(COMPRESSION),
        "reward": {"pool_per_round": 1_000_000, "vesting_rounds": 2},
        "determinism": configure_determinism(1, "cpu").model_dump(mode="json"),
        "selfcheck_reference": {device_class(cpu): workload_hash(cpu)},
        # The admission challenge is on, as in a permissionless run: each join waits for
        # a seed from a later beacon round and for the auditor's recomputed reference.
        "coordinator": coordinator,
        # the new-run recipe's data-parallel warm start (docs/parity.md): the operator
        # trains it before round 0 (warm_start_cmd) and the aggregator publishes it
        **({"warm_start": warm} if warm else {}),
    }
    return {**doc, "dispute": dispute_section(cfg, doc)}


def dispute_section(cfg: DevnetConfig, doc: dict[str, Any]) -> dict[str, Any]:
    """The devnet's dispute deadlines: the scenario's own, raised to what one answer's
    replay takes on the devnet's beacon (``protocol.deadlines.answer_floor_rounds``), or
    the service would refuse the run."""
    base: dict[str, Any] = dict(ROLLBACK_DISPUTES) if cfg.rollback else {}
    rules = DisputeSpec.model_validate(base)
    floor = answer_floor_rounds(RunManifest.model_validate(doc), cfg.beacon_period_s)
    answer = max(rules.answer_rounds, floor)
    return {**base, "answer_rounds": answer, "clock_rounds": max(rules.clock_rounds, 2 * answer)}


def warm_start_cmd(manifest: Path, dataset: Path, out: Path) -> list[str]:
    """The operator's warm start: round 0's model, written to ``out``."""
    return hypertrain_cmd(
        *("run", "warm-start", "--manifest", str(manifest)),
        *("--dataset-dir", str(dataset), "--out", str(out)),
    )


def miner_args(
    member: Identity, service: str, relay: str, dataset: Path, state: Path, coordinator: str
) -> list[str]:
    return [
        *("--service-url", service, "--relay-url", relay, "--run-id", RUN_ID),
        *("--dataset-dir", str(dataset), "--state-dir", str(state / member.name)),
        *("--key-file", str(member.key_file), "--coordinator", coordinator),
    ]


def join_cmd(args: list[str], micro_batches: int | None = None) -> list[str]:
    """Join with ``micro_batches`` per step (the island's budget); None = the run's default.

    On a loaded machine an admission answer may miss its window of a few beacon rounds:
    the join then answers a fresh challenge, at most three in all (the orchestrator's
    wait for a join covers them and the service's backoff between them)."""
    extra = ["--micro-batches", str(micro_batches)] if micro_batches else []
    return miner_cmd("join", *args, *extra, "--region", REGION, "--join-attempts", "3")


def island_cmd(args: list[str]) -> list[str]:
    return miner_cmd("run", "--follow", *args)


def honeypot_cmd(args: list[str], strategy: str, honest_rounds: int) -> list[str]:
    """The same miner, with the cheat injected by the operator's honeypot tooling."""
    return honeypot_island_cmd(strategy, honest_rounds, "run", "--follow", *args)


def watch_cmd(args: list[str]) -> list[str]:
    """An island's ``watch --follow``: it disputes a verdict its own replay refutes."""
    return miner_cmd("watch", "--follow", *args)


def _worker_args(secrets: Secrets, member: Identity, service: str, relay: str,
                 dataset: Path) -> list[str]:  # fmt: skip
    return [
        *("--poll-s", "0.5", "--service-url", service, "--relay-url", relay, "--run-id", RUN_ID),
        *("--key-file", str(member.key_file), "--worker-token-file", str(secrets.worker_token)),
        *("--dataset-dir", str(dataset), "--coordinator", secrets.coordinator.ss58),
    ]


def auditor_cmd(secrets: Secrets, service: str, relay: str, dataset: Path) -> list[str]:
    return hypertrain_cmd(
        "auditor",
        "run",
        "--follow",
        *_worker_args(secrets, secrets.auditor, service, relay, dataset),
    )


def lying_auditor_cmd(
    cfg: DevnetConfig, secrets: Secrets, service: str, relay: str, dataset: Path
) -> list[str]:
    """The rollback scenario's auditor: the operator's lying honeypot auditor, which from
    the honeypot's first cheat on says ``match`` for the honeypot and ``mismatch`` for the
    first honest island (it answers disputes from its honest replay)."""
    flips = ("--flip", secrets.islands[-1].ss58, "--flip", secrets.islands[0].ss58)
    return python_cmd(
        "hypertrain.honeypot.auditor",
        *flips,
        *("--after-round", str(cfg.honeypot_honest_rounds)),
        *_worker_args(secrets, secrets.auditor, service, relay, dataset),
    )


def juror_cmd(
    secrets: Secrets, juror: Identity, service: str, relay: str, dataset: Path
) -> list[str]:
    """A standby juror: an honest auditor that only re-audits what the service lists."""
    return hypertrain_cmd(
        *("auditor", "run", "--follow", "--standby"),
        *_worker_args(secrets, juror, service, relay, dataset),
    )


def witness_cmd(secrets: Secrets, service: str, relay: str, state: Path) -> list[str]:
    """The tape witness: recomputes each merged round under its own key and attests."""
    return hypertrain_cmd(
        *("aggregator", "witness", "--follow", "--poll-s", "0.5"),
        *("--service-url", service, "--relay-url", relay, "--run-id", RUN_ID),
        *("--key-file", str(secrets.witness.key_file), "--state-dir", str(state)),
    )


def aggregator_cmd(
    cfg: DevnetConfig,
    secrets: Secrets,
    service: str,
    relay: str,
    state: Path,
    dataset: Path,
    genesis_model: Path | None = None,
) -> list[str]:
    genesis = ["--genesis-model", str(genesis_model)] if genesis_model else []
    return hypertrain_cmd(
        *("aggregator", "run", "--follow", "--poll-s", "0.5", "--max-rounds", str(cfg.rounds)),
        *("--last-round", str(cfg.rounds - 1)),
        *("--service-url", service, "--relay-url", relay, "--run-id", RUN_ID),
        *("--key-file", str(secrets.aggregator.key_file)),
        *("--worker-token-file", str(secrets.worker_token)),
        *("--admin-token-file", str(secrets.admin_token), "--state-dir", str(state)),
        *("--dataset-dir", str(dataset)),  # held-out loss of each merged model
        *genesis,
    )
