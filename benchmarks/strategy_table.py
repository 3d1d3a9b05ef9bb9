"""What each strategy earns and loses at the defaults ``hypertrain run init`` writes.

Exact expectations, no sampling: the same model as ``bench_economics.py`` plays on the
real ledger (it agrees with it to the printed digit), taken from ``RunOptions``' own
defaults so that a change to what ``run init`` writes changes this table. One attacker
hotkey among ``HONEST`` honest islands of equal budget serves its ``P`` probation rounds
honestly (audited every round, rewards held), then plays its strategy every round, each
audited with probability ``q``. The first audit, in post-probation round ``T`` with
``P(T = t) = q (1 - q)^t``, is a fault that burns everything unpaid; one settlement and
one ``get_weights`` epoch a round (the fastest payout). A reward vests in ``V`` tranches,
tranche ``i`` of round ``w`` at clock ``w + 1 + i``, so at ``T``

    paid by the cheating rounds = (1/V) sum_{j<T} min(V, j)      (reward, "paid" strategies)
    unpaid = T - that + P (V - min(V, T)) / V                     (burn: its escrow and
                                                                   the held probation pay)

in units of one round's share ``pool / (HONEST + 1)``. Per round is the expectation over
the ``1/q`` rounds a strategy plays before it is caught.

    .venv/bin/python benchmarks/strategy_table.py            # writes the doc and the JSON
    .venv/bin/python benchmarks/strategy_table.py --check    # exit 1 if the doc is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from hypertrain.ops.manifest import RunOptions

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "mechanism.md"
RESULT = ROOT / "benchmarks" / "results" / "strategy_table.json"
BEGIN = "<!-- strategy-table:begin (benchmarks/strategy_table.py) -->"
END = "<!-- strategy-table:end -->"
HONEST = 7  # honest islands beside the attacker, as in bench_economics.py
SYBILS = 4  # the k of "sybil x k"
TAIL = 1e-15  # chance mass of T left out of the sums


@dataclass(frozen=True, slots=True)
class Defaults:
    """The economics a new run gets (``run init``'s defaults)."""

    audit_rate: float
    vesting_rounds: int
    probation_rounds: int
    pool_per_round: int
    bond: int
    audit_segments: int
    num_segments: int

    @classmethod
    def of_run_init(cls) -> Defaults:
        opts = RunOptions(run_id="x", dataset_dir=Path())
        return cls(
            audit_rate=opts.audit_rate,
            vesting_rounds=opts.vesting_rounds,
            probation_rounds=opts.probation_rounds,
            pool_per_round=opts.pool_per_round,
            bond=opts.pool_per_round // 10,  # ops.manifest.dispute_section
            audit_segments=opts.audit_segments,
            num_segments=opts.inner_steps // opts.checkpoint_interval,
        )

    @property
    def share(self) -> float:
        return self.pool_per_round / (HONEST + 1)

    @property
    def replays_per_round(self) -> float:
        """Audit compute: segments replayed per island and round after probation."""
        return self.audit_rate * (min(self.audit_segments, self.num_segments - 1) + 1)


@dataclass(frozen=True, slots=True)
class Row:
    strategy: str
    unaudited_round: str
    reward_shares: float  # expected, over the strategy's life, in rounds of one share
    burn_shares: float
    reward_per_round: int  # base units, per round played
    burn_per_round: int
    cheating: bool

    @property
    def burn_exceeds_reward(self) -> bool:
        return self.burn_shares > self.reward_shares


def expectation(d: Defaults, paid: bool) -> tuple[float, float]:
    """(E[reward], E[burn]) in shares of one attacker hotkey."""
    q, v, p = d.audit_rate, d.vesting_rounds, d.probation_rounds
    reward = burn = 0.0
    paid_before = 0.0  # (1/V) sum_{j<t} min(V, j)
    t = 0
    while True:
        chance = q * (1 - q) ** t
        own = paid_before if paid else 0.0
        reward += chance * own
        burn += chance * ((t - own if paid else 0.0) + p * (v - min(v, t)) / v)
        if q >= 1 or (1 - q) ** (t + 1) < TAIL:
            return reward, burn
        paid_before += min(v, t) / v
        t += 1


def rows(d: Defaults) -> list[Row]:
    """Each strategy's expected reward and burn at ``d``."""
    q, share = d.audit_rate, d.share
    paid = expectation(d, paid=True)
    unpaid = expectation(d, paid=False)
    cases = (
        ("honest", "paid its share; audits find nothing", (1 / q, 0.0), 1, False),
        ("noisy copy (cosine 0.91)", "merged and paid an honest share", paid, 1, True),
        ("replayed update", "`stale_update`: unpaid", unpaid, 1, True),
        ("silent (commits, never uploads)", "`missing_blob`: unpaid", unpaid, 1, True),
        (f"sybil x {SYBILS} (noisy copies)", "each paid an honest share", paid, SYBILS, True),
        ("lying auditor (`match` for its own noisy copy)", "as the noisy copy", paid, 1, True),
    )
    out = []
    for name, unaudited, (reward, burn), k, cheating in cases:
        out.append(
            Row(name, unaudited, k * reward, k * burn,
                round(q * k * reward * share), round(q * k * burn * share), cheating)
        )  # fmt: skip
    return out


def least_vesting(d: Defaults) -> int:
    """The shortest vesting at ``d``'s audit rate with burn > reward for every strategy."""
    v = 1
    while not all(r.burn_exceeds_reward for r in rows(replace(d, vesting_rounds=v)) if r.cheating):
        v += 1
    return v


def least_rate(d: Defaults) -> float:
    """The lowest audit rate (in steps of 0.01) at ``d``'s vesting with burn > reward."""
    for cents in range(1, 101):
        at = replace(d, audit_rate=cents / 100)
        if all(r.burn_exceeds_reward for r in rows(at) if r.cheating):
            return at.audit_rate
    return 1.0


def table(d: Defaults) -> str:
    head = (
        f"At q = {d.audit_rate}, V = {d.vesting_rounds}, P = {d.probation_rounds}, pool"
        f" {d.pool_per_round:,} a round (one share {d.share:,.0f} among {HONEST + 1} islands),"
        f" bond {d.bond:,}:\n\n"
        "| strategy | an unaudited round | E[reward] | E[burn] | per round: reward / burn"
        " (base units) | burn > reward |\n| --- | --- | --- | --- | --- | --- |\n"
    )
    body = "".join(
        f"| {r.strategy} | {r.unaudited_round} | {r.reward_shares:.2f} | {r.burn_shares:.2f}"
        f" | {r.reward_per_round:,} / {r.burn_per_round:,}"
        f" | {('**yes**' if r.burn_exceeds_reward else '**no**') if r.cheating else 'n/a'} |\n"
        for r in rows(d)
    )
    return head + body + "\n" + levers(d)


def levers(d: Defaults) -> str:
    """Which change keeps burn > reward at the least audit compute."""
    v, q = least_vesting(d), least_rate(d)
    at_q = replace(d, vesting_rounds=v)
    at_v = replace(d, audit_rate=q)
    return (
        f"Burn stays above reward for every strategy down to V = {v} at q = {d.audit_rate}"
        f" ({at_q.replays_per_round:.2f} segment replays per island-round), or down to"
        f" q = {q} at V = {d.vesting_rounds} ({at_v.replays_per_round:.2f}). Audit compute"
        " grows with q and not with V, so vesting is the lever that costs none; the defaults"
        " stay the manifest's field defaults (changing one would change the hash of every"
        " manifest that leaves it out), with a margin on both.\n"
    )


def render_doc(text: str, d: Defaults) -> str:
    """``text`` with the section between the markers replaced by the table at ``d``."""
    before, rest = text.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    return f"{before}{BEGIN}\n{table(d)}{END}{after}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the doc is stale")
    args = parser.parse_args()
    d = Defaults.of_run_init()
    text = DOC.read_text(encoding="utf-8")
    fresh = render_doc(text, d)
    if args.check:
        return 0 if fresh == text else 1
    DOC.write_text(fresh, encoding="utf-8")
    result = {
        "defaults": asdict(d),
        "honest_islands": HONEST,
        "rows": [{**asdict(r), "burn_exceeds_reward": r.burn_exceeds_reward} for r in rows(d)],
        "least_vesting_at_rate": least_vesting(d),
        "least_rate_at_vesting": least_rate(d),
    }
    RESULT.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    sys.stdout.write(table(d))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
