"""The long-running network of docs/operator.md and the competition of docs/competition.md.

Every block is extracted from the Markdown and run verbatim: the start command brings
the recipe's network up in the background, the export command takes the newest merged
model out, the competition page's block runs a competition beside the network with that
model as its entry, and the stop command ends every process the recipe started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.e2e.launch import wait_for
from tests.ops.test_recipe import DOC, ROOT, _all_logs, _ports, block, recipe

COMPETITION = ROOT / "docs" / "competition.md"


def test_the_competition_block_is_bash_that_names_its_evaluators() -> None:
    text = block(COMPETITION, "<!-- recipe:competition -->")
    assert "--evaluator" in text and "competition create" in text
    assert "--run-id shakespeare-tiny" in recipe()  # the recipe's relay serves it
    for marker in ("start", "stop", "export"):
        assert subprocess.run(["bash", "-n"], input=block(DOC, f"<!-- recipe:{marker} -->"),
                              text=True, check=False).returncode == 0  # fmt: skip
    assert subprocess.run(["bash", "-n"], input=text, text=True, check=False).returncode == 0


def _session(sid: int) -> list[int]:
    """The processes still alive in session ``sid`` (Linux /proc)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    alive.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                continue
    return alive


def _bash(
    text: str, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", text], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def _wait_merged(service: str, pid: int, logs: Path) -> None:
    """Until the service reports a merged round (the recipe must stay up meanwhile)."""

    def merged() -> bool:
        assert _alive(pid), "the recipe ended early"  # _with_logs adds the logs
        answer = httpx.get(f"{service}/v1/runs/local/rounds", timeout=5)
        return answer.status_code == 200 and any(r["new_model_sha256"] for r in answer.json())

    _with_logs(lambda: wait_for(merged, 600, "a merged round", poll_s=1), logs)


def _with_logs(wait: Callable[[], object], logs: Path) -> None:
    """Run ``wait``; a timeout's message carries every log of the recipe."""
    try:
        wait()
    except AssertionError as exc:
        raise AssertionError(f"{exc}{_all_logs(logs)}") from exc


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_start_export_compete_and_stop_run_verbatim(tmp_path: Path) -> None:
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    (cwd / "tests" / "assets").mkdir(parents=True)
    home.mkdir()
    corpus = (ROOT / "tests" / "assets" / "tinyshakespeare.txt").read_text(encoding="utf-8")
    (cwd / "tests" / "assets" / "tinyshakespeare.txt").write_text(corpus, encoding="utf-8")
    (cwd / "recipe.sh").write_text(recipe(), encoding="utf-8")
    (cwd / "private.txt").write_text(corpus[-20_000:], encoding="utf-8")
    beacon, service, relay, data = _ports(4)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "BEACON_PORT": str(beacon), "SERVICE_PORT": str(service),
        "RELAY_PORT": str(relay), "DATA_PORT": str(data),
        "HF_HUB_OFFLINE": "1",
    }  # fmt: skip
    net = home / "hypertrain-local"
    logs = net / "logs"
    starter = subprocess.Popen(
        ["bash", "-c", block(DOC, "<!-- recipe:start -->")], cwd=cwd, env=env,
        start_new_session=True,
    )  # fmt: skip
    assert starter.wait(timeout=60) == 0
    env["W"] = str(net)
    try:
        pid = _pid(net / "recipe.pid", logs)
        _wait_merged(f"http://127.0.0.1:{service}", pid, logs)
        exported = _bash(block(DOC, "<!-- recipe:export -->"), cwd, env, 300)
        assert exported.returncode == 0, exported.stderr + _all_logs(logs)
        names = {"config.json", "model.safetensors", "tokenizer.json"}
        assert names <= {p.name for p in (net / "model").iterdir()}
        env["POOL_TEXT"] = "private.txt"
        compete = _bash(block(COMPETITION, "<!-- recipe:competition -->"), cwd, env, 900)
        assert compete.returncode == 0, compete.stdout + compete.stderr + _all_logs(logs)
        assert "competition shakespeare-tiny" in compete.stdout
        assert "revealed" in compete.stdout or "reveal" in compete.stdout, compete.stdout
        stopped = _bash(block(DOC, "<!-- recipe:stop -->"), cwd, env, 120)
        assert stopped.returncode == 0, stopped.stderr
        assert not _alive(pid)
        left = _session(starter.pid)
        assert not left, f"processes left running: {left}" + _all_logs(logs)
        assert "Traceback" not in (logs / "recipe.log").read_text()
    finally:
        for stray in _session(starter.pid):
            os.kill(stray, signal.SIGKILL)
    shutil.rmtree(net / "relay", ignore_errors=True)


def _pid(path: Path, logs: Path) -> int:
    _with_logs(
        lambda: wait_for(lambda: path.is_file() and path.read_text().strip(), 60, "a pid file"),
        logs,
    )
    return int(path.read_text())
