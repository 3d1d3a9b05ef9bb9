"""A devnet killed outright goes on with ``--resume``: same run, same chain, every round.

The end-to-end case runs ``hypertrain devnet`` as its own process on a tiny network,
SIGKILLs that process (not its children, which run in their own sessions and go on
as orphans, as they would after a crash or a session's end) once round 1 is final, and
starts the same command again with ``--resume``: it must stop the orphans, start every
role on the kept state and finish every round with the ledger verified and no child
left. The small cases pin the pieces: the secrets read back, the session file, and
stale children.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hypertrain.devnet import keys, resume
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.procs import PIDS_FILE, Supervisor, hypertrain_cmd, stop_stale
from hypertrain.devnet.roles import RUN_ID

ROUNDS = 5
WAIT_S = 300.0  # a bound for a stuck run, not a pace


def test_secrets_read_back(tmp_path: Path) -> None:
    made = keys.generate(tmp_path, islands=2, jurors=1)
    back = keys.load(tmp_path)

    def people(s: keys.Secrets) -> list[tuple[str, str, Path]]:
        every = (s.coordinator, *s.islands, s.auditor, s.aggregator, s.witness, *s.jurors)
        return [(i.name, i.ss58, i.key_file) for i in every]

    assert people(back) == people(made)
    assert (back.admin_token, back.metagraph) == (made.admin_token, made.metagraph)


def test_no_secrets_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no devnet secrets"):
        keys.load(tmp_path)


def test_session_round_trip_and_bad_file(tmp_path: Path) -> None:
    assert resume.load(tmp_path) is None  # nothing to resume: a fresh run
    session = resume.Session(8123, 8124, "bad-update", {"salt": "00", "entries": []}, True)
    resume.save(tmp_path, session)
    assert resume.load(tmp_path) == session
    (tmp_path / resume.SESSION_FILE).write_text("{not json")
    with pytest.raises(DevnetError, match="cannot resume"):
        resume.load(tmp_path)


def test_stop_stale_kills_only_hypertrain_children(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    ours = sup.start("island-1", [sys.executable, "-c", "import time; time.sleep(600)",
                                  "hypertrain"])  # fmt: skip
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             start_new_session=True)  # fmt: skip
    try:
        with (tmp_path / PIDS_FILE).open("a") as f:
            f.write(f"{other.pid} not-ours\n")
        assert stop_stale(tmp_path) == 1
        assert ours.process.wait(timeout=10) == -signal.SIGKILL
        assert other.poll() is None  # not a hypertrain command: left alone
        assert not (tmp_path / PIDS_FILE).exists()
    finally:
        other.kill()
        other.wait()


def _devnet(tmp: Path) -> list[str]:
    return hypertrain_cmd(
        *("devnet", "--rounds", str(ROUNDS), "--islands", "2", "--h", "4", "--j", "2"),
        *("--preset", "tiny", "--seq-len", "32", "--vocab-size", "512", "--port", "0"),
        *("--warm-start-percent", "2", "--honeypot", "bad-update", "--exit-when-done"),
        *("--state-dir", str(tmp / "devnet"), "--cache-dir", str(tmp / "cache"), "--resume"),
    )


def _final_rounds(port: int) -> int:
    try:
        doc = httpx.get(f"http://127.0.0.1:{port}/v1/runs/{RUN_ID}/dashboard", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return 0
    return sum(1 for r in doc.get("rounds", []) if r["phase"] == "final")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_killed_devnet_resumes_to_the_end(tmp_path: Path) -> None:
    log = (tmp_path / "first.log").open("wb")
    first = subprocess.Popen(_devnet(tmp_path), stdout=log, stderr=subprocess.STDOUT)
    session_file = tmp_path / "devnet" / "state" / resume.SESSION_FILE
    deadline = time.monotonic() + WAIT_S
    try:
        while (
            not session_file.exists()
            or _final_rounds(json.loads(session_file.read_text())["service_port"]) < 2
        ):
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "rounds 0-1 were not final in time"
            time.sleep(0.5)
    finally:
        os.kill(first.pid, signal.SIGKILL)  # its children go on, orphaned
        first.wait()
    second = subprocess.run(_devnet(tmp_path), capture_output=True, text=True,
                            timeout=WAIT_S * 2, check=False)  # fmt: skip
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "resuming the run" in second.stdout
    report = json.loads((tmp_path / "devnet" / "report.json").read_text())
    assert len(report["rounds"]) == ROUNDS
    assert report["ledger_verified"] is True
    assert report["children_left"] == 0
