"""One devnet per state directory: an exclusive lock taken before anything there is touched.

A devnet clears ``<state-dir>/state`` when it starts and when it exits. Two devnets on
one state directory would delete each other's keys, databases and logs, so each takes
an exclusive ``flock`` on ``<state-dir>/devnet.lock`` first and holds it until it has
cleaned up. A second devnet there fails at once, naming the process that holds the lock,
and leaves every file as it found it; a devnet on another ``--state-dir`` is unaffected.
The kernel drops the lock when its holder exits, however it exits, so a killed devnet
never leaves a stale lock behind; the file itself stays (removing a lock file others
may be waiting on would let two holders in).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from hypertrain.devnet.errors import DevnetError

LOCK_FILE: Final = "devnet.lock"


class StateDirBusyError(DevnetError):
    """Another devnet holds the state directory's lock."""


def holder_pid(path: Path) -> int | None:
    """The pid the lock's holder wrote into ``path`` (None: unreadable or not written yet)."""
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


@contextmanager
def state_lock(state_dir: Path) -> Iterator[Path]:
    """Hold ``state_dir``'s devnet lock for the ``with`` block (yields the lock file), or
    raise :class:`StateDirBusyError` at once, without waiting and without changing any file."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # no truncation before the lock
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if not isinstance(exc, BlockingIOError):
            raise
        pid = holder_pid(path)
        who = f"pid {pid}" if pid is not None else "a process that has not written its pid yet"
        raise StateDirBusyError(
            f"another devnet ({who}) is running on {state_dir}: stop it first, or give this"
            " one its own --state-dir"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        yield path
    finally:
        os.close(fd)  # releases the lock
