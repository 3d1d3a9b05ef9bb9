"""Expected reward against expected burn of each merge-level cheating strategy, on the real ledger.

One attacker hotkey among ``--honest`` honest islands of equal budget joins a run, is
on probation for ``P`` rounds (audited every round, so it trains honestly and its
rewards are held), then plays one strategy every round. After probation each round
it is audited with probability ``q``; every strategy here trains nothing (or not what
it uploads), so an audit is a ``mismatch`` and the fault burns all its unpaid value.
An unaudited round ends as the merge decides (docs/mechanism.md, "Robust
aggregation"):

* ``unpaid``: excluded and not paid (copy ``duplicate_update``; noisy copy, average,
  reversed copy, IPM ``near_duplicate`` / ``against_aggregate``; random noise
  ``against_aggregate``; an all-zero update ``zero_norm``: no merge exclusion is a fault
  on the tape's word, so it is unpaid, burned only by an audit);
* ``paid``: merged and paid like an honest update (ALIE: no statistic separates it at
  4-16 islands, so the worst case is assumed).

The real :class:`~hypertrain.ledger.ledger.Ledger` plays the never-caught trajectory
(one settlement and one ``get_weights`` epoch per round, the fastest payout the
service allows); being first audited in post-probation round ``t`` burns what is
unpaid then (checked against a real ``record_fault`` for a few ``t``). With
``P(t) = q (1 - q)^t``:

    E[reward] = sum_t P(t) * paid by the cheating rounds before t
    E[burn]   = sum_t P(t) * unpaid at t (the cheating rounds' escrow and the held
                probation rewards)

Amounts are in units of one round's share ``r = pool / (honest + 1)``. The ledger is
linear in its escrows, so the cheating rounds' payout is the trajectory's minus that of
the same probation followed by idling.

    .venv/bin/python benchmarks/bench_economics.py [--rate Q --vesting V --probation P]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import write_result
from hypertrain.ledger.ledger import Ledger
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import AuditSpec, RewardSpec

RUN = "econ"
POOL = 1_000_000_000
ATTACKER = Hotkey.from_seed(b"\x01" * 32).ss58_address
STRATEGIES = {  # what an unaudited round does to the attacker's update
    "copy": "unpaid",
    "noisy_copy": "unpaid",
    "average": "unpaid",
    "reversed": "unpaid",
    "ipm": "unpaid",
    "zero_compute_random": "unpaid",
    "zero_compute_zeros": "unpaid",
    "alie": "paid",
}


@dataclass(frozen=True)
class Trajectory:
    paid: list[int]  # paid to the attacker before post-probation round t
    unpaid: list[int]  # what a fault in round t burns


def _play(root: Path, outcome: str, horizon: int, vesting: int, probation: int, honest: int,
          fault_at: int | None = None) -> tuple[Trajectory, int]:  # fmt: skip
    """Settle ``probation + horizon`` rounds; returns the trajectory (and a real burn)."""
    others = [Hotkey.from_seed(bytes([2 + i]) * 32).ss58_address for i in range(honest)]
    registered = [ATTACKER, *others]
    paid: list[int] = []
    unpaid: list[int] = []
    burned = 0
    with Ledger(root / f"{outcome}-{fault_at}.sqlite3") as ledger:
        ledger.create_run(RUN, POOL, vesting)
        for w in range(probation + horizon):
            t = w - probation
            earns = w < probation or outcome == "paid"
            accepted = dict.fromkeys(others, 1)
            if earns and t != fault_at:
                accepted[ATTACKER] = 1
            held = {ATTACKER: probation} if w < probation else None
            result = ledger.settle_round(RUN, w, accepted, epoch=w, held=held)
            if t >= 0:
                bal = ledger.balances(RUN, ATTACKER)
                paid.append(bal.paid)
                unpaid.append(bal.escrowed + bal.vested - result.rewards.get(ATTACKER, 0))
            if t == fault_at:
                burned = ledger.record_fault(RUN, w, ATTACKER, "mismatch", epoch=w)
                break
            ledger.get_weights(w, registered)
    return Trajectory(paid, unpaid), burned


def expected(q: float, outcome: str, full: Trajectory, idle: Trajectory) -> tuple[float, float]:
    """(E[reward of the cheating rounds], E[burn]) in base units."""
    reward = burn = 0.0
    for t, (p_full, p_idle, u) in enumerate(zip(full.paid, idle.paid, full.unpaid, strict=True)):
        chance = q * (1 - q) ** t
        reward += chance * (p_full - p_idle)
        burn += chance * u
    return reward, burn


def evaluate(
    q: float, vesting: int, probation: int, honest: int, horizon: int
) -> dict[str, object]:
    share = POOL / (honest + 1)
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="bench-econ-") as tmp:
        root = Path(tmp)
        runs = {
            o: _play(root, o, horizon, vesting, probation, honest)[0] for o in ("paid", "unpaid")
        }
        for t in (0, 3, vesting):  # the derived burn is what record_fault really burns
            _, real = _play(root, "paid", horizon, vesting, probation, honest, fault_at=t)
            assert real == runs["paid"].unpaid[t], (t, real, runs["paid"].unpaid[t])
        for name, outcome in STRATEGIES.items():
            full = runs["paid" if outcome == "paid" else "unpaid"]
            reward, burn = expected(q, outcome, full, runs["unpaid"])
            out[name] = {
                "unaudited_round": outcome,
                "expected_reward_rounds": round(reward / share, 3),
                "expected_burn_rounds": round(burn / share, 3),
                "burn_exceeds_reward": burn > reward,
            }
    return out


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=AuditSpec().rate)
    parser.add_argument("--vesting", type=int, default=RewardSpec().vesting_rounds)
    parser.add_argument("--probation", type=int, default=AuditSpec().probation_rounds)
    parser.add_argument("--honest", type=int, default=7)
    parser.add_argument("--compare-vesting", type=int, nargs="*", default=[10])
    args = parser.parse_args()
    horizon = 400  # (1 - q)^400 of the chance mass is left out: below 1e-18 at q = 0.1
    table = {f"q={args.rate} V={args.vesting} P={args.probation}":
             evaluate(args.rate, args.vesting, args.probation, args.honest, horizon)}  # fmt: skip
    for v in args.compare_vesting:
        table[f"q={args.rate} V={v} P={args.probation}"] = evaluate(
            args.rate, v, args.probation, args.honest, horizon
        )
    for setting, rows in table.items():
        print(setting)
        for name, row in rows.items():
            print(f"  {name:22s} {row}")
    write_result(
        "economics",
        {
            "settings": table,
            "honest_islands": args.honest,
            "horizon_rounds": horizon,
            "git_commit": _commit(),
        },
        targets={"burn_exceeds_reward": "true for every strategy at the manifest defaults"},
        notes="real ledger, one settlement and one get_weights epoch per round; amounts in "
        "rounds of one island's share; the attacker trains honestly during probation",
    )


if __name__ == "__main__":
    main()
