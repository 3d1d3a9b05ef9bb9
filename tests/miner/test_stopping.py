"""Stopping ``hypertrain-miner run --follow``: SIGINT and SIGTERM end it with one line
saying where it stopped and exit 130 or 143, also when it was started with ``&`` by a
script (a non-interactive shell starts such a job with SIGINT ignored)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hypertrain.cli import main
from hypertrain.miner.island import StepEvent
from hypertrain.miner.report import Reporter
from tests.ops.conftest import LiveService, live_service, small_dataset  # noqa: F401
from tests.ops.test_errors import _closed_port, _new_key


def _miner(svc: LiveService, tmp_path: Path, dataset: Path) -> list[str]:
    """The command line of a miner of a run made by ``run init`` (this host's CPU record)."""
    manifest = tmp_path / "run.json"
    init = ["run", "init", "--run-id", "run-1", "--preset", "tiny", "--dataset-dir", str(dataset),
            "--local"]  # fmt: skip
    assert main([*init, "--out", str(manifest)]) == 0
    create = ["challenge", "create-run", "--service-url", svc.url, "--manifest", str(manifest)]
    assert main([*create, "--admin-token-file", str(svc.admin_token)]) == 0
    key = _new_key(tmp_path, "island")
    return [sys.executable, "-m", "hypertrain.miner.cli", "run", "--follow",
            "--service-url", svc.url, "--relay-url", f"http://127.0.0.1:{_closed_port()}",
            "--run-id", "run-1", "--key-file", str(key), "--dataset-dir", str(tmp_path / "none"),
            "--state-dir", str(tmp_path / "island")]  # fmt: skip


def _wait_started(proc: subprocess.Popen[str]) -> None:
    """Read stdout up to the miner's ``started`` event (its signal handlers are set)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("{") and json.loads(line).get("event") == "started":
            return
    raise AssertionError(proc.stderr.read() if proc.stderr else "no started event")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_miner_with_one_line(
    live_service: LiveService,  # noqa: F811
    small_dataset: Path,  # noqa: F811
    tmp_path: Path,
    sig: signal.Signals,
    code: int,
) -> None:
    proc = subprocess.Popen(_miner(live_service, tmp_path, small_dataset), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _wait_started(proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    lines = [x for x in err.splitlines() if x.startswith("stopped by")]
    assert lines == [
        f"stopped by {sig.name} before any round (waiting for one to open); run the same"
        " command to resume (a round in progress is redone from its last checkpoint, with the"
        " same bytes)"
    ], err
    assert "Traceback" not in err
    assert json.loads(out.splitlines()[-1])["event"] == "stopped"


def test_a_miner_started_with_ampersand_by_a_script_stops_on_sigint(
    live_service: LiveService,  # noqa: F811
    small_dataset: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The recipe's islands: ``cmd &`` in bash without job control ignores SIGINT; the
    miner handles it anyway, and the script's ``wait`` sees 130."""
    script = '"$@" & echo "pid $!" >&2; wait $!'
    argv = ["bash", "-c", script, "bash", *_miner(live_service, tmp_path, small_dataset)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_started(proc)
        assert proc.stderr is not None
        miner = next(int(x.split()[1]) for x in proc.stderr if x.startswith("pid "))
        os.kill(miner, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "stopped by SIGINT before any round" in err


def test_where_names_the_round_and_step() -> None:
    class Sink:
        def write(self, text: str) -> int:
            return len(text)

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return False

    r = Reporter("miner", stream=Sink())  # type: ignore[arg-type]
    assert r.where() == "before any round (waiting for one to open)"
    r.event("round_start", round=3, samples=8, steps=15)
    r.step(3, StepEvent(step=5, total=15, loss=4.2, tokens_per_s=100.0))
    assert r.where() == "in round 3 at step 5 of 15 (training)"
    r.event("audit_served", round=2)  # about an earlier round: not where training is
    assert r.where() == "in round 3 at step 5 of 15 (training)"
    r.event("uploaded", round=3, bytes=10)
    assert r.where() == "in round 3, after its upload and before its commit"
    r.event("committed", round=3)
    assert r.where() == "after committing round 3 (waiting for the next round)"
    r.event("waiting", round=4)
    assert r.where() == "in round 4 (waiting)"
