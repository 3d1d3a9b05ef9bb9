"""Kill and restart the devnet's roles while it runs: the chain must go on regardless.

A role (``ROLES``) names one child of the devnet: the challenge service, the relay, the
aggregator, the auditor, an honest island (``island-1``) or the tape witness. Killing
one is SIGKILL to its whole process group, as a crash or the kernel's out-of-memory
killer would; restarting it runs the same command line with the same environment and
listening sockets (:meth:`hypertrain.devnet.procs.Supervisor.restart`), on its own state
directory, so it must resume from its own durable state and the public records.

:class:`ChaosLoop` does that to one role drawn at random every few rounds opened
(``hypertrain devnet --chaos-every N``, ``benchmarks/bench_soak.py``); the per-role tests
(``tests/devnet/test_restarts.py``) do it to each role once. :func:`ledger_check` is the
money check both read afterwards: the ledger's journal verifies, and what was minted is
exactly one pool per settled round and equals what the balances hold.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.procs import Supervisor, hypertrain_cmd

Role = Literal["service", "relay", "aggregator", "auditor", "island", "witness"]
ROLES: Final[tuple[Role, ...]] = ("service", "relay", "aggregator", "auditor", "island", "witness")
ISLAND: Final = "island-1"  # the first honest island (the honeypot is the last)
# The rollback scenario's lying auditor leaves once it is barred; the standby jurors judge
# from then on, so a kill of "the auditor" hits the first of these still running.
AUDITORS: Final[tuple[str, ...]] = ("auditor", "juror-1", "juror-2")


def child_name(role: Role) -> str:
    """The devnet child a role's kill hits (the auditor: see :func:`target`)."""
    return ISLAND if role == "island" else role


def target(sup: Supervisor, role: Role) -> str:
    """The child to kill for ``role``: its child, or for the auditor the first auditing
    child still running (the lying auditor, then the jurors that stand in for it)."""
    if role != "auditor":
        return child_name(role)
    names = [c.name for c in sup.children if c.name in AUDITORS]
    live = [n for n in AUDITORS if n in names and sup.child(n).alive]
    return (live or [child_name(role)])[0]


@dataclass(frozen=True, slots=True)
class ChaosEvent:
    """One kill and restart: which role, while which round was the newest open one."""

    role: Role
    child: str  # the process it hit
    round: int
    killed_unix: float
    down_s: float  # from the kill to the restarted process's start


def kill_and_restart(sup: Supervisor, role: Role, newest_round: int) -> ChaosEvent:
    """SIGKILL ``role``'s process group and start it again the same way."""
    killed, name = time.time(), target(sup, role)
    sup.restart(name)
    return ChaosEvent(role, name, newest_round, killed, time.time() - killed)


@dataclass
class ChaosLoop:
    """Every ``period_rounds`` rounds opened, kill and restart one role drawn by ``seed``.

    The roles are drawn as shuffled cycles (each role once, in a random order, then
    again), so six kills hit every role."""

    period_rounds: int
    seed: int
    events: list[ChaosEvent] = field(default_factory=list)
    _next_round: int = -1
    _rng: random.Random = field(init=False)
    _cycle: list[Role] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.period_rounds < 1:
            raise DevnetError(f"the chaos period must be >= 1 round, not {self.period_rounds}")
        self._rng = random.Random(self.seed)
        self._next_round = self.period_rounds

    def draw(self) -> Role:
        if not self._cycle:
            self._cycle = list(ROLES)
            self._rng.shuffle(self._cycle)
        return self._cycle.pop()

    def step(self, sup: Supervisor, newest_round: int | None) -> ChaosEvent | None:
        """Kill and restart a role if ``newest_round`` (the newest open round) is due."""
        if newest_round is None or newest_round < self._next_round:
            return None
        event = kill_and_restart(sup, self.draw(), newest_round)
        self.events.append(event)
        self._next_round = newest_round + self.period_rounds
        return event

    def report(self) -> list[dict[str, Any]]:
        return [asdict(e) for e in self.events]


def loop_for(every_rounds: int, seed: int) -> ChaosLoop | None:
    """The chaos loop of ``--chaos-every N`` (None for 0: no chaos)."""
    return ChaosLoop(every_rounds, seed) if every_rounds else None


def newest_round(doc: dict[str, Any] | None) -> int | None:
    """The newest round the dashboard document lists (None: none opened yet)."""
    rounds = [] if doc is None else [r["round"] for r in doc["rounds"]]
    return max(rounds, default=None)


@dataclass(frozen=True, slots=True)
class LedgerCheck:
    """The ledger after a run: its journal verifies and no unit was lost or doubled."""

    verified: bool
    minted: int
    held: int  # escrowed + vested + paid + burned, over every miner and the run
    expected_minted: int  # one pool per settled round
    rounds_settled: int
    detail: str

    @property
    def units_lost_or_doubled(self) -> int:
        """Units missing (negative) or extra (positive) against one pool per round."""
        return (self.held - self.minted) + (self.minted - self.expected_minted)

    @property
    def ok(self) -> bool:
        return self.verified and self.held == self.minted == self.expected_minted


def ledger_check(service_dir: Path, run_id: str) -> LedgerCheck:
    """Verify the service's ledger and compare what it minted with what it holds."""

    def ledger(*args: str) -> subprocess.CompletedProcess[str]:
        argv = hypertrain_cmd("ledger", *args, "--state-dir", str(service_dir), "--run", run_id)
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)

    verify, summary = ledger("verify"), ledger("summary")
    if summary.returncode != 0:
        raise DevnetError(f"hypertrain ledger summary failed: {summary.stderr[-500:]}")
    s = json.loads(summary.stdout)
    held = int(s["escrowed"]) + int(s["vested"]) + int(s["paid"]) + int(s["burned"])
    return LedgerCheck(
        verified=verify.returncode == 0,
        minted=int(s["minted"]),
        held=held,
        expected_minted=int(s["pool_per_round"]) * int(s["rounds_settled"]),
        rounds_settled=int(s["rounds_settled"]),
        detail=(verify.stdout + verify.stderr).strip()[-500:],
    )
