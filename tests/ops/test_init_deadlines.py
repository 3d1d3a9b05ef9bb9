"""``run init`` sizes the dispute deadlines to one segment's replay and refuses a shorter
answer deadline; ``competition init`` refuses a score window that cannot hold one model's
scoring. Each refusal is one line naming the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.cli import main
from hypertrain.protocol.deadlines import answer_floor_rounds
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.manifest_file import manifest_document


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_init_sizes_the_answer_deadline_and_refuses_a_shorter_one(
    small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["run", "init", "--run-id", "r1", "--preset", "proxy", "--dataset-dir",
            str(small_dataset), "--h", "60", "--j", "60", "--warm-start-percent", "0",
            "--local"]  # fmt: skip
    out = tmp_path / "run.json"
    code, _, err = _run(capsys, *args, "--out", str(out))
    assert code == 0, err
    manifest = RunManifest.model_validate(manifest_document(out.read_bytes()))
    floor = answer_floor_rounds(manifest)
    assert manifest.dispute.answer_rounds == floor > 10  # the default, raised to the replay
    assert manifest.dispute.clock_rounds >= floor
    at_1s = tmp_path / "fast.json"
    assert _run(capsys, *args, "--beacon-period-s", "1", "--out", str(at_1s))[0] == 0
    fast = RunManifest.model_validate(manifest_document(at_1s.read_bytes()))
    assert fast.dispute.answer_rounds == answer_floor_rounds(fast, 1) > floor
    short = tmp_path / "short.json"
    code, _, err = _run(capsys, *args, "--dispute-answer-rounds", "10", "--out", str(short))
    assert code == 1 and not short.exists()
    assert "dispute.answer_rounds = 10 beacon rounds cannot hold one answer" in err, err
    assert f"at least {floor}" in err


def test_competition_init_refuses_a_window_shorter_than_one_models_scoring(
    small_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["competition", "init", "--competition-id", "c1", "--dataset-dir", str(small_dataset)]
    code, _, err = _run(capsys, *args, "--score-window-rounds", "60", "--out",
                        str(tmp_path / "short.json"))  # fmt: skip
    assert code == 1 and not (tmp_path / "short.json").exists()
    assert "cycle.score_window_rounds = 60 is 180 s at 3 s per beacon round" in err, err
    assert "shorter than the 600 s" in err and "at least 200" in err
    fits = ["--score-window-rounds", "60", "--model-time-limit-s", "150"]
    assert _run(capsys, *args, *fits, "--out", str(tmp_path / "spec.json"))[0] == 0
    assert _run(capsys, *args, "--out", str(tmp_path / "default.json"))[0] == 0  # 240 rounds
