"""The long-run result measures the recipe new runs get, and its figures mean what they say.

``benchmarks/results/longrun.json`` is what docs/parity.md and the README quote for the
product's quality: it must be a run of the recipe ``run init`` and the devnet write (the
state policy, the outer step, H), with a baseline for every round, and its derived figures
(the moving average's longest rise, the gap) must follow from its own per-round series.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks")]

from hypertrain.api.models import RoundDetail  # noqa: E402
from hypertrain.devnet.config import DevnetConfig  # noqa: E402
from hypertrain.protocol.manifest import CompressionSpec, RunManifest  # noqa: E402
from hypertrain.protocol.recipe import (  # noqa: E402
    COMPRESSION,
    INNER_STATE,
    OUTER_STEP,
    STATE_POLICY,
    WARM_START_PERCENT,
    warm_start_steps,
)
from longrun_report import (  # noqa: E402
    NAMES_H,
    SEED,
    WINDOW,
    longest_rise,
    moving_average,
    network_losses,
    result_tag,
    warm_percent,
)
from tests.aggregator.helpers import manifest as aggregator_manifest  # noqa: E402

# the long run of the recipe new runs get (Muon at H = 20: names relative to NAMES_H)
RESULT = ROOT / "benchmarks" / "results" / "longrun-muon-h20.json"
CURVES = ROOT / "benchmarks" / "results" / "longrun" / "curves-muon-h20.json"


def test_the_long_run_is_of_the_recipe_new_runs_get() -> None:
    result = json.loads(RESULT.read_text())
    recipe = result["recipe"]
    assert recipe["state_policy"] == STATE_POLICY
    assert (recipe["optimizer"], recipe["carried_dtype"]) == (
        INNER_STATE["name"],
        INNER_STATE["carried_dtype"],
    )
    assert recipe["entropy_coded"] == COMPRESSION["entropy"]
    assert (recipe["outer"]["lr"], recipe["outer"]["momentum"]) == (
        OUTER_STEP["lr"],
        OUTER_STEP["momentum"],
    )
    assert recipe["outer"]["broadcast"] == OUTER_STEP["broadcast"]
    assert recipe["codec"] == CompressionSpec.model_validate(COMPRESSION).codec
    assert recipe["inner_steps"] == DevnetConfig().inner_steps
    assert recipe["checkpoint_interval"] == DevnetConfig().checkpoint_interval
    # the recipe's warm-start share of the run's rounds (none: 0 steps)
    rounds = result["rounds"] * recipe["inner_steps"]
    assert recipe["warm_start_steps"] == warm_start_steps(rounds, WARM_START_PERCENT)


def test_the_figures_follow_from_the_series() -> None:
    result, curves = json.loads(RESULT.read_text()), json.loads(CURVES.read_text())
    net, dp = curves["network_loss"], curves["baseline_loss"]
    n = result["rounds_with_baseline"]
    assert n == len(dp) == len(curves["tokens"]) and len(net) == result["rounds"] >= n
    assert curves["commit"] == result["commit"]
    assert result["final_gap_pct"] == 100 * (net[n - 1] / dp[n - 1] - 1)
    assert result["network_longest_ma5_rise"] == longest_rise(moving_average(net))
    assert net[n - 1] < net[0]  # the network trains


def test_the_moving_average_and_its_longest_rise() -> None:
    assert moving_average([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == [3.0, 4.0]
    assert WINDOW == 5
    assert longest_rise([5.0, 4.0, 4.5, 4.6, 4.7, 4.0, 4.1]) == 3
    assert longest_rise([3.0, 2.0, 1.0]) == 0


def _detail(round_: int, loss: float | None, merged: bool = True) -> RoundDetail:
    return RoundDetail.model_construct(
        round=round_, eval_loss=loss, new_model_sha256="ab" * 32 if merged else None
    )


def test_a_round_that_merged_nothing_keeps_the_loss_before_it() -> None:
    """A round no island committed in time leaves the model as it was; a round that
    merged a model and has no loss is an error, not a gap in the curve."""
    rounds = [_detail(0, 5.0), _detail(1, 4.5), _detail(2, None, merged=False), _detail(3, 4.4)]
    assert network_losses(rounds) == [5.0, 4.5, 4.5, 4.4]
    with pytest.raises(SystemExit, match="round 1"):
        network_losses([_detail(0, 5.0), _detail(1, None)])
    with pytest.raises(SystemExit, match="round 0"):
        network_losses([_detail(0, None, merged=False)])


def _longrun_manifest(
    warm: int, round_steps: int, seed: int, h: int = NAMES_H, **inner: str
) -> RunManifest:
    doc = json.loads(aggregator_manifest().canonical())
    doc["seed"] = seed
    doc["round"] = {**doc["round"], "inner_steps": h, "checkpoint_interval": h}
    # AdamW unless told: result files without an optimizer suffix are AdamW runs
    recipe_inner = {**INNER_STATE, "name": "adamw", "total_steps": warm + round_steps}
    doc["inner"] = {**doc.get("inner", {}), **recipe_inner, **inner}
    if warm:
        doc["warm_start"] = {"steps": warm, "samples_per_step": 8}
    return RunManifest.model_validate(doc)


def test_a_variant_is_named_by_what_differs_from_the_recipe() -> None:
    """``longrun.json`` is AdamW's run of the recipe's other settings at H = 15,
    ``longrun-muon.json`` Muon's; a variant's files and note name its warm-start share, H
    and seed (a seed run's note once read "1-seed8 %")."""
    recipe_warm = warm_start_steps(3000, WARM_START_PERCENT)
    recipe = _longrun_manifest(recipe_warm, 3000, SEED)
    assert result_tag(recipe) == "" and warm_percent(recipe) is None
    ten = _longrun_manifest(warm_start_steps(3000, 10), 3000, SEED + 1)
    assert result_tag(ten) == f"-warm10-seed{SEED + 1}" and warm_percent(ten) == 10
    other = 0 if WARM_START_PERCENT else 1  # a share other than the recipe's
    variant = _longrun_manifest(warm_start_steps(3000, other), 3000, SEED)
    assert result_tag(variant) == f"-warm{other}" and warm_percent(variant) == other
    assert result_tag(_longrun_manifest(recipe_warm, 3000, 8)) == "-seed8"
    longer = _longrun_manifest(recipe_warm, 3000, 8, h=30)
    assert result_tag(longer) == "-h30-seed8"
    # the recipe's H = 20 keeps the name the runs that measured it had
    assert result_tag(_longrun_manifest(recipe_warm, 3000, SEED, h=20)) == "-h20"
    muon = _longrun_manifest(recipe_warm, 3000, SEED, name="muon")
    assert result_tag(muon) == "-muon" and INNER_STATE["name"] == "muon"  # the recipe's
    wide = _longrun_manifest(recipe_warm, 3000, 8, carried_dtype="float32")
    assert result_tag(wide) == "-f32slots-seed8"
    # under reset nothing is carried, so the slots' width names nothing
    reset = _longrun_manifest(
        recipe_warm, 3000, SEED, state_policy="reset", carried_dtype="float32"
    )
    assert result_tag(reset) == ""


def test_the_benchmarks_help_prints() -> None:
    """Every option's help formats (a bare ``%`` in one once made ``--help`` crash)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_longrun.py"), "--help"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT / 'benchmarks'}"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--optimizer" in done.stdout and "% of all steps" in done.stdout
