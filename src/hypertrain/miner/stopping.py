"""Stopping a miner on SIGINT or SIGTERM: one line saying where, and exit 130 or 143.

``run`` installs :func:`catch_stop_signals`: each signal raises :class:`StopSignal`
(a ``BaseException``, so no ``except Exception`` on the way swallows it) in the main
thread, and a second signal while the first unwinds is ignored. Handling SIGINT
explicitly also undoes the ``SIG_IGN`` that a non-interactive shell gives a job it
starts with ``&`` (docs/operator.md's recipe), so such a miner stops on Ctrl-C too.

Nothing is lost by stopping: a round's checkpoints stay in its work directory, and
training is deterministic, so a restart redoes the round from its last checkpoint
and produces the same bytes (``miner.island.earlier_work``).
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Final

from hypertrain.miner.report import Reporter

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


class StopSignal(BaseException):
    """SIGINT or SIGTERM arrived; the process exits with ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def catch_stop_signals() -> None:
    """Raise :class:`StopSignal` on the first SIGINT or SIGTERM; ignore any later one."""
    stopping = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise StopSignal(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, handler)


def stopped(stop: StopSignal, reporter: Reporter) -> int:
    """Report where the miner stopped (a ``stopped`` event and one line on stderr); the
    exit code (130 for SIGINT, 143 for SIGTERM)."""
    where = reporter.where()
    reporter.stop_steps()
    reporter.event("stopped", signal=stop.name, where=where)
    sys.stderr.write(
        f"stopped by {stop.name} {where}; run the same command to resume (a round in"
        " progress is redone from its last checkpoint, with the same bytes)\n"
    )
    return stop.exit_code
