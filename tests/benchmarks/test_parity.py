"""The parity harness: its bit-for-bit identities, its frozen known answer, its refusal
of stale results, its statistics and the quick grid's documented JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "benchmarks")]

import parity_identity  # noqa: E402
import parity_plots  # noqa: E402
import parity_round  # noqa: E402
import parity_sim  # noqa: E402
from hypertrain.protocol.manifest import ModelSpec, SparseSpec  # noqa: E402
from hypertrain.trainer.determinism import configure_determinism, cpu_vendor  # noqa: E402
from hypertrain.trainer.round_config import island_train_config  # noqa: E402
from hypertrain.trainer.warm_start import run_warm_start  # noqa: E402
from parity_stats import (  # noqa: E402
    DEFAULT_RECIPE_CELL,
    against_default,
    combine,
    gap_stats,
    provenance,
)
from tests.known_answers import PROFILE  # noqa: E402

VOCAB, SEQ = 64, 17


@pytest.fixture(scope="module")
def setup() -> parity_sim.Setup:
    configure_determinism(1)
    model = ModelSpec(
        vocab_size=VOCAB, d_model=16, num_layers=1, num_heads=2, head_dim=8, ffn_hidden=32,
        context_length=SEQ,
    )  # fmt: skip
    return parity_sim.Setup(
        model=model, seq_len=SEQ, batch_per_island=2, steps=10, lr=3e-3, warmup_steps=2,
        muon_lr=0.02, sparse=SparseSpec(chunk_size=64, topk_per_chunk=4), eval_every=5,
    )  # fmt: skip


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    rng = np.random.default_rng(7)
    windows = rng.integers(0, VOCAB, size=(200, SEQ), dtype=np.int64)
    return {"windows": windows, "heldout": torch.from_numpy(windows[:8].copy())}


def _checks(setup: parity_sim.Setup, data: dict[str, Any]) -> dict[str, bool]:
    out = parity_identity.identity_checks(setup, data)
    return {k: v["holds"] for k, v in out.items() if k != "dp_known_answer"}


def test_identities_hold_bit_for_bit(setup: parity_sim.Setup, data: dict[str, Any]) -> None:
    assert _checks(setup, data) == {
        "dp_equals_diloco_M1_H1": True,
        "dp_equals_diloco_M1_H5": True,
        "M2_identical_data_equals_one_island_int8": True,
        "M4_identical_data_equals_one_island_none": True,
        "M3_identical_data_equals_one_island_recipe_reset": True,
        "M3_identical_data_equals_one_island_recipe_carry": True,
    }


def test_a_lost_round_index_breaks_the_identity(
    setup: parity_sim.Setup, data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The identity catches the old bug: every round trained at schedule step 0."""

    def round_zero(manifest: Any, round_index: int, **kw: Any) -> Any:
        return island_train_config(manifest, 0, **kw)

    monkeypatch.setattr(parity_sim, "island_train_config", round_zero)
    monkeypatch.setattr(parity_round, "island_train_config", round_zero)
    checks = _checks(setup, data)
    assert not checks["dp_equals_diloco_M1_H5"]


def test_a_lossy_codec_breaks_the_identity(
    setup: parity_sim.Setup, data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = parity_identity._avg
    monkeypatch.setattr(
        parity_identity,
        "_avg",
        lambda n, m, h, codec="none", outer=(1.0, 0.0): real(n, m, h, "int8", outer),
    )
    assert not _checks(setup, data)["dp_equals_diloco_M1_H1"]


def test_the_warm_start_is_the_data_parallel_arm(
    setup: parity_sim.Setup, data: dict[str, Any]
) -> None:
    """A warm start over every step is the data-parallel arm, and round 0 starts from its
    parameters in the ``reset`` state at the step after it."""
    order = np.arange(setup.steps * 2 * setup.batch_per_island) % len(data["windows"])
    d = parity_sim.Data(data["windows"], data["heldout"], order)
    dp = parity_sim.run_dp(parity_sim.Cell("dp", "dp", 2, codec="none"), setup, d, 0)
    cell = parity_sim.Cell("w", "diloco", 2, 5, codec="none", warm_start=setup.steps)
    manifest = parity_sim.cell_manifest(setup, cell, 0)
    assert manifest.compression.error_feedback is False
    batches = parity_sim.dp_batches(manifest, d, 2, range(setup.steps))
    warm = run_warm_start(manifest, batches)
    assert warm.state_hash().hex() == dp.final_state_sha256
    start = parity_sim.genesis_state(manifest, cell, d)
    assert start.step == setup.steps
    assert all(torch.equal(start.tensors[k], v) for k, v in warm.params().items())
    assert not any(start.tensors[k].any() for k in start.tensors if k.startswith("optim."))


def test_the_data_parallel_arm_reproduces_its_frozen_curve() -> None:
    env = {**os.environ, **PROFILE, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "parity.py"), "--known-answer"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    frozen = parity_identity.frozen_answer()
    if frozen is None:
        pytest.skip(f"no curve frozen for CPU vendor {cpu_vendor()}")
    assert json.loads(done.stdout) == frozen


def test_tost_verdicts() -> None:
    assert gap_stats([0.1, -0.1, 0.05, 0.0, -0.05])["tost"] == "equivalent"
    assert gap_stats([3.0, 3.2, 2.9, 3.1, 3.0])["tost"] == "not equivalent"
    wide = gap_stats([0.0, 2.0, -2.0])
    assert wide["tost"] == "undecided" and not wide["non_inferior"]
    one = gap_stats([1.0])
    assert one["gap_pct_ci90"] is None and one["tost"] == "undecided (one seed)"


def _task(name: str, kind: str, seed: int, loss: float, baseline: str = "") -> dict[str, Any]:
    return {
        "name": name, "kind": kind, "islands": 8, "inner_steps": 25, "baseline": baseline,
        "seed": seed, "final_loss": loss, "curve": [[200, loss]], "wall_seconds": 1.0,
        "size": "s", "exploratory": False,
    }  # fmt: skip


def test_gaps_are_paired_against_the_tuned_data_parallel_arm() -> None:
    tasks = [
        _task("dp-M8-s-lr0.003", "dp", 0, 4.0),
        _task("dp-M8-s-lr0.006", "dp", 0, 3.0),  # the tuned arm (lowest seed-0 loss)
        _task("dp-M8-s-lr0.006", "dp", 1, 3.3),
        *(
            _task("diloco-M8-s-H25-x-lr0.006", "diloco", s, v, "dp-M8-s-best")
            for s, v in ((0, 3.3), (1, 3.3))
        ),
    ]
    cell = combine(tasks)["diloco-M8-s-H25-x-lr0.006"]
    assert cell["baseline_cell"] == "dp-M8-s-lr0.006"
    assert cell["gap_pct"] == pytest.approx([10.0, 0.0])
    assert cell["recipe"] == "H25-x-lr0.006"


def test_cells_are_ranked_against_the_default_recipe_paired_by_seed() -> None:
    """The pre-registered default rule: ``beats`` only with the paired interval below 0."""
    base = [3.0, 3.2, 3.1]
    tasks = [_task(DEFAULT_RECIPE_CELL, "diloco", s, v) for s, v in enumerate(base)]
    tasks += [_task("diloco-M8-s-H5-better", "diloco", s, v - 0.1) for s, v in enumerate(base)]
    tasks += [_task("diloco-M8-s-H5-noisy", "diloco", s, v + d) for s, (v, d) in
              enumerate(zip(base, (-0.3, 0.3, 0.0), strict=True))]  # fmt: skip
    tasks += [_task("diloco-M8-s-H5-one", "diloco", 0, 2.0)]
    rows = {r["name"]: r for r in against_default(combine(tasks))}
    assert rows["diloco-M8-s-H5-better"]["verdict"] == "beats"
    assert rows["diloco-M8-s-H5-noisy"]["verdict"] == "undecided"
    assert rows["diloco-M8-s-H5-one"]["verdict"] == "undecided"  # one seed: no interval
    assert DEFAULT_RECIPE_CELL not in rows


def test_plotting_refuses_a_result_of_other_harness_files(tmp_path: Path) -> None:
    doc = {**provenance(), "task": _task("dp-M8-s-lr0.003", "dp", 0, 4.0)}
    (tmp_path / "dp-M8-s-lr0.003--seed0.json").write_text(json.dumps(doc))
    head, tasks = parity_plots.load_tasks(tmp_path)
    assert len(tasks) == 1 and head["harness_sha256"] == doc["harness_sha256"]
    for key in ("harness_sha256", "trainer_sha256"):
        (tmp_path / "dp-M8-s-lr0.003--seed0.json").write_text(json.dumps({**doc, key: "0" * 64}))
        with pytest.raises(parity_plots.StaleResultError, match=key):
            parity_plots.load_tasks(tmp_path)
    assert parity_plots.main([str(tmp_path), "--out", str(tmp_path / "c.json")]) == 2


@pytest.mark.slow
def test_quick_grid_checks_the_identities_and_writes_the_documented_json(tmp_path: Path) -> None:
    out = tmp_path / "quick.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "parity.py"), "--quick", "--out", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["grid"] == "quick" and len(doc["harness_sha256"]) == 64 and doc["commit"]
    known = doc["identity"]["dp_known_answer"]
    assert known["holds"] is (True if parity_identity.frozen_answer() else None)
    assert {v["holds"] for k, v in doc["identity"].items() if k != "dp_known_answer"} == {True}
    assert len(doc["identity"]) == 7
    cells = combine(doc["tasks"])
    assert [c["kind"] for c in cells.values()].count("dp") == 1
    for cell in cells.values():
        assert len(cell["final_loss"]) == len(cell["seeds"]) == 3
        assert cell["bytes_sent"] > 0 and np.isfinite(cell["final_loss_mean"])
        if cell["kind"] == "diloco":
            assert cell["seeds_paired"] == 3 and cell["tost"] in {
                "equivalent",
                "undecided",
                "not equivalent",
            }
            assert cell["dp_bytes_per_byte_sent"] > 1


def test_the_product_recipe_is_the_cell_the_docs_name() -> None:
    """What ``run init`` and the devnet write (``protocol.recipe``) is the recipe of
    ``PRODUCT_RECIPE_CELL``: its outer step and broadcast, inner state policy and
    warm-start share; its H = 15 was the recipe's until the long run moved it to 20."""
    import parity_explore
    from hypertrain.devnet.config import DevnetConfig
    from hypertrain.ops.manifest import RunOptions
    from hypertrain.protocol.recipe import (
        INNER_STEPS,
        OUTER_STEP,
        STATE_POLICY,
        WARM_START_PERCENT,
    )
    from parity_stats import PRODUCT_RECIPE_CELL

    cells = {c.name: c for c, _ in parity_explore.cells({})}
    cell = cells[PRODUCT_RECIPE_CELL]
    steps = 100  # the grid's global steps (docs/parity.md, "Shapes")
    # the grid chose H = 15; the long run (docs/parity.md, "The long run": two seeds each
    # inside the quality target at H = 20) chose the recipe's H, which both tools write
    assert cell.inner_steps == 15 < INNER_STEPS
    assert RunOptions(run_id="x", dataset_dir=Path()).inner_steps == INNER_STEPS
    assert DevnetConfig().inner_steps == INNER_STEPS
    assert (cell.outer_lr, cell.outer_momentum) == (OUTER_STEP["lr"], OUTER_STEP["momentum"])
    # the grid's cell broadcasts as the recipe does; its width (int8 there, the recipe's
    # 4 bits now) was measured apart at the long run's horizon (parity_horizon.py: equal)
    assert cell.broadcast == (OUTER_STEP.get("broadcast") is not None)
    assert cell.policy == STATE_POLICY
    assert 100 * cell.warm_start == WARM_START_PERCENT * steps
