"""docs/mechanism.md's strategy table is what ``benchmarks/strategy_table.py`` computes
from ``run init``'s defaults, those defaults are the manifest model's, and every
cheating strategy burns more than it earns at them."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks")]

import strategy_table  # noqa: E402
from hypertrain.ops.manifest import RunOptions  # noqa: E402
from hypertrain.protocol.manifest import AuditSpec, DisputeSpec, RewardSpec  # noqa: E402

DEFAULTS = strategy_table.Defaults.of_run_init()


def test_the_doc_holds_the_table_computed_from_run_inits_defaults() -> None:
    text = strategy_table.DOC.read_text(encoding="utf-8")
    assert text.count(strategy_table.BEGIN) == 1 and text.count(strategy_table.END) == 1
    fresh = strategy_table.render_doc(text, DEFAULTS)
    assert fresh == text, "docs/mechanism.md is stale: run benchmarks/strategy_table.py"


def test_burn_exceeds_reward_for_every_cheating_strategy_at_the_defaults() -> None:
    rows = strategy_table.rows(DEFAULTS)
    cheats = [r for r in rows if r.cheating]
    assert len(cheats) == 5 and [r.strategy for r in rows if not r.cheating] == ["honest"]
    for row in cheats:
        assert row.burn_exceeds_reward, row
        assert row.burn_per_round > row.reward_per_round, row


def test_run_init_writes_the_manifest_models_economics() -> None:
    opts, audit, reward = RunOptions(run_id="x", dataset_dir=Path()), AuditSpec(), RewardSpec()
    assert (opts.audit_rate, opts.audit_segments, opts.probation_rounds) == (
        audit.rate,
        audit.segments,
        audit.probation_rounds,
    )
    assert (opts.pool_per_round, opts.vesting_rounds) == (
        reward.pool_per_round,
        reward.vesting_rounds,
    )
    assert DEFAULTS.bond == DisputeSpec().bond  # a tenth of the pool, as run init sizes it


@pytest.mark.parametrize("setting", ["q=0.1 V=10 P=2", "q=0.1 V=20 P=2"])
def test_the_closed_form_agrees_with_the_real_ledger(setting: str) -> None:
    """bench_economics.py played these on the real ledger; the expectation here matches."""
    played = json.loads((ROOT / "benchmarks/results/economics.json").read_text())["settings"]
    q, v, p = (part.split("=")[1] for part in setting.split())
    at = replace(DEFAULTS, audit_rate=float(q), vesting_rounds=int(v), probation_rounds=int(p))
    for paid, name in ((True, "alie"), (False, "copy")):
        reward, burn = strategy_table.expectation(at, paid=paid)
        assert round(reward, 3) == played[setting][name]["expected_reward_rounds"]
        assert round(burn, 3) == played[setting][name]["expected_burn_rounds"]


def test_the_old_run_init_economics_were_a_gain_without_the_probation_stake() -> None:
    """q = 0.25, V = 4 kept burn above reward only by the held probation pay; the least
    vesting that holds at the default rate is shorter than the default (a margin)."""
    old = replace(DEFAULTS, audit_rate=0.25, vesting_rounds=4)
    reward, burn = strategy_table.expectation(replace(old, probation_rounds=0), paid=True)
    assert reward > burn
    assert strategy_table.least_vesting(DEFAULTS) < DEFAULTS.vesting_rounds
    assert old.replays_per_round > 2 * DEFAULTS.replays_per_round
