"""Devnet settings, keys and the process supervisor (fast, no network)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hypertrain.devnet.config import DevnetConfig
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.keys import generate
from hypertrain.devnet.procs import Supervisor


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rounds": 0}, "--rounds"),
        ({"islands": 0}, "--islands"),
        ({"islands": 99}, "--islands"),
        ({"inner_steps": 6, "checkpoint_interval": 4}, "multiple"),
        ({"inner_steps": 2, "checkpoint_interval": 4}, "--j"),
        ({"preset": "huge"}, "--preset"),
        ({"port": 70000}, "--port"),
        ({"vocab_size": 10}, "--vocab-size"),
        ({"timeout_s": 0}, "--timeout-s"),
        ({"islands": 2, "island_budgets": (1, 2, 3)}, "budgets"),
        ({"islands": 2, "island_budgets": (1, 0)}, "budgets"),
        ({"honeypot": "lazy"}, "--honeypot"),
        ({"rounds": 3, "honest_rounds": 3}, "cheats at least once"),
        ({"honest_rounds": -1}, "--honest-rounds"),
        ({"scenario": "chaos"}, "--scenario"),
        ({"optimizer": "sgd"}, "--optimizer"),
        ({"scenario": "rollback", "honeypot": "bad-update"}, "merge lets in"),
        ({"scenario": "rollback", "rounds": 3}, "--honest-rounds \\+ 3"),
        ({"scenario": "rollback", "rounds": 5, "honest_rounds": 3}, "corrected model"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(DevnetError, match=message):
        DevnetConfig(**kwargs)  # type: ignore[arg-type]


def test_islands_plan_different_budgets() -> None:
    layouts = DevnetConfig(islands=4).island_layouts()  # the honeypot's comes last
    assert [lay["micro_batches"] for lay in layouts] == [1, 2, 3, 1, 1]
    chosen = DevnetConfig(islands=2, island_budgets=(2, 5))
    assert [lay["micro_batches"] for lay in chosen.island_layouts()] == [2, 5, 1]
    assert chosen.max_micro_batches == 5
    assert chosen.windows[0] > DevnetConfig(islands=2, island_budgets=(2, 2)).windows[0]


def test_the_honeypot_is_honest_first_then_cheats_at_least_once() -> None:
    from hypertrain.devnet.config import HONEST_ROUNDS, HONEYPOT_STRATEGIES
    from hypertrain.honeypot.cheats import STRATEGIES

    assert HONEYPOT_STRATEGIES == STRATEGIES  # the devnet names the tooling's cheats
    assert DevnetConfig().honeypot_honest_rounds == HONEST_ROUNDS < DevnetConfig().rounds
    assert DevnetConfig(rounds=2).honeypot_honest_rounds == 1  # capped at R - 1
    assert DevnetConfig(rounds=1).honeypot_honest_rounds == 0
    assert DevnetConfig(rounds=4, honest_rounds=3).honeypot_honest_rounds == 3
    assert DevnetConfig(honest_rounds=0).honeypot_honest_rounds == 0


def test_the_honeypot_runs_through_the_operator_tooling() -> None:
    from hypertrain.devnet.roles import honeypot_cmd, island_cmd

    args = ["--run-id", "devnet"]
    cmd = honeypot_cmd(args, "skip-steps", 2)
    assert cmd[1:] == ["-m", "hypertrain.honeypot.island", "--strategy", "skip-steps",
                       "--honest-rounds", "2", "--", "run", "--follow", *args]  # fmt: skip
    assert island_cmd(args)[1:] == ["-m", "hypertrain.miner.cli", "run", "--follow", *args]


def test_windows_follow_h_and_can_be_overridden() -> None:
    short = DevnetConfig(inner_steps=8, checkpoint_interval=4)
    long = DevnetConfig(inner_steps=32, checkpoint_interval=4)
    assert short.windows < long.windows
    assert DevnetConfig(commit_window_s=40, audit_window_s=30).windows == (40, 30)


def test_generated_secrets_are_private_and_listed(tmp_path: Path) -> None:
    sec = generate(tmp_path / "s", islands=3)
    assert [m.name for m in sec.islands] == ["island-1", "island-2", "island-3", "island-4"]
    for path in (sec.internal_token, sec.admin_token, sec.worker_token, sec.coordinator_seed):
        assert path.stat().st_mode & 0o077 == 0 and len(sec.token(path)) >= 16
    listed = json.loads(sec.metagraph.read_text())["hotkeys"]
    assert set(listed) == {m.ss58 for m in sec.islands} | {sec.witness.ss58}  # it attests
    # one name everywhere: island-<uid>, as the dashboard names them
    assert {f"island-{listed[m.ss58]}" for m in sec.islands} == {m.name for m in sec.islands}
    assert sec.auditor.ss58 not in listed and len({m.ss58 for m in sec.islands}) == 4


def test_supervisor_stops_process_groups(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "logs")
    script = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    )
    sup.start("sleeper", [sys.executable, "-c", script])
    sup.start("quick", [sys.executable, "-c", "print('hi')"]).process.wait(timeout=30)
    assert sup.children_left() == 1
    sup.stop_all()
    assert sup.children_left() == 0
    assert (tmp_path / "logs" / "quick.log").read_text().strip() == "hi"


def test_a_failed_child_is_reported_with_its_log(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "logs")
    sup.start("broken", [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    sup.children[0].process.wait(timeout=30)
    with pytest.raises(DevnetError, match=r"(?s)broken exited with status 3.*boom"):
        sup.check()


def test_the_rollback_scenario_plans_its_auditors_disputes_and_audits(tmp_path: Path) -> None:
    from hypertrain.devnet.roles import juror_cmd, lying_auditor_cmd

    default, cfg = DevnetConfig(), DevnetConfig(scenario="rollback", rounds=8)
    assert (default.standby_jurors, default.dispute_window_rounds) == (0, 2)
    assert (cfg.standby_jurors, cfg.honeypot_honest_rounds, cfg.probation_rounds) == (2, 1, 8)
    # outlasts the honest island's game and the re-audits: at least the audit window
    assert cfg.dispute_window_rounds == max(20, cfg.windows[1]) > 2
    short = DevnetConfig(scenario="rollback", rounds=8, audit_window_s=15)
    assert short.dispute_window_rounds == 20
    sec = generate(tmp_path / "s", islands=2, jurors=cfg.standby_jurors)
    assert [j.name for j in sec.jurors] == ["juror-1", "juror-2"]
    metagraph = json.loads(sec.metagraph.read_text())["hotkeys"]
    assert not {j.ss58 for j in sec.jurors} & set(metagraph)  # workers, not miners
    liar = lying_auditor_cmd(cfg, sec, "http://s", "http://r", tmp_path)
    assert liar[1:3] == ["-m", "hypertrain.honeypot.auditor"]
    flips = [liar[i + 1] for i, a in enumerate(liar) if a == "--flip"]
    assert flips == [sec.islands[-1].ss58, sec.islands[0].ss58]  # the honeypot, island-1
    assert liar[liar.index("--after-round") + 1] == "1"  # from the honeypot's first cheat
    juror = juror_cmd(sec, sec.jurors[0], "http://s", "http://r", tmp_path)
    assert juror[3:7] == ["auditor", "run", "--follow", "--standby"]
    assert str(sec.jurors[0].key_file) in juror


def test_the_devnets_dispute_deadlines_hold_one_answer_on_its_beacon() -> None:
    """The service refuses an answer deadline under one segment's replay on its beacon
    (protocol.deadlines), so the devnet sizes its own to it, for each scenario."""
    from hypertrain.devnet.roles import dispute_section
    from hypertrain.protocol.deadlines import answer_floor_rounds
    from hypertrain.protocol.manifest import RunManifest
    from tests.challenge.helpers import manifest_doc

    doc = manifest_doc("devnet")
    doc["model"] = {"vocab_size": 4096, "d_model": 256, "num_layers": 4, "num_heads": 4,
                    "head_dim": 64, "ffn_hidden": 704, "context_length": 32}  # fmt: skip
    default, rollback = DevnetConfig(), DevnetConfig(scenario="rollback", rounds=8)
    floor = answer_floor_rounds(RunManifest.model_validate(doc), default.beacon_period_s)
    assert 10 < floor < 60  # the manifest default (10) would be refused on a 1 s beacon
    assert dispute_section(default, doc) == {"answer_rounds": floor, "clock_rounds": 60}
    assert dispute_section(rollback, doc) == {"bond": 0, "answer_rounds": 60, "clock_rounds": 600}
    small = manifest_doc("devnet")
    assert dispute_section(default, small) == {"answer_rounds": 10, "clock_rounds": 60}
