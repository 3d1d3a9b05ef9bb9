"""One devnet per state directory: a second one fails at once and touches nothing.

The first devnet is stood in for by a process that holds the lock as ``run_devnet``
does; the second is the real ``hypertrain devnet`` command. Each waits on the other's
output or exit, never on a clock.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hypertrain.devnet.lock import LOCK_FILE, StateDirBusyError, holder_pid, state_lock

HOLD = (
    "import sys; from pathlib import Path; from hypertrain.devnet.lock import state_lock\n"
    "with state_lock(Path(sys.argv[1])):\n"
    "    print('locked', flush=True)\n"
    "    sys.stdin.read()\n"
)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A state directory with a previous run's files, locked by another process."""
    state_dir = tmp_path / "devnet"
    (state_dir / "state").mkdir(parents=True)
    (state_dir / "state" / "service.db").write_text("the running devnet's ledger")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(state_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    try:
        yield state_dir, holder
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()


def test_a_second_devnet_on_the_same_state_dir_names_the_first_and_touches_nothing(
    running: tuple[Path, subprocess.Popen[str]],
) -> None:
    state_dir, holder = running
    before = {p: p.read_bytes() for p in state_dir.rglob("*") if p.is_file()}
    second = subprocess.run(
        [sys.executable, "-m", "hypertrain.cli", "devnet", "--state-dir", str(state_dir),
         "--exit-when-done"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert second.returncode == 1, second.stderr
    assert f"another devnet (pid {holder.pid}) is running on {state_dir}" in second.stderr
    assert "--state-dir" in second.stderr and "Traceback" not in second.stderr
    assert {p: p.read_bytes() for p in state_dir.rglob("*") if p.is_file()} == before
    assert holder_pid(state_dir / LOCK_FILE) == holder.pid


def test_the_lock_is_free_once_its_holder_exits_and_other_state_dirs_never_wait(
    running: tuple[Path, subprocess.Popen[str]], tmp_path: Path
) -> None:
    state_dir, holder = running
    with state_lock(tmp_path / "other") as other:  # another --state-dir runs beside it
        assert holder_pid(other) is not None
    with pytest.raises(StateDirBusyError, match=f"pid {holder.pid}"), state_lock(state_dir):
        pass
    assert holder.stdin is not None
    holder.stdin.close()  # the holder leaves its with-block and exits
    assert holder.wait() == 0
    with state_lock(state_dir) as path:
        assert holder_pid(path) == os.getpid()
