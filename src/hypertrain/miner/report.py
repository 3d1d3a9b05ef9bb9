"""Progress output: a rich progress bar on a terminal, one JSON line per event otherwise.

The devnet reads the JSON lines (``{"event": ..., "round": ..., ...}``) from stdout,
so every process of the network logs the same way.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, TextIO

from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from hypertrain.miner.island import StepEvent


class Reporter:
    """Structured events; ``step`` drives a progress bar when stdout is a TTY."""

    def __init__(self, role: str, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.role = role
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self._progress: Progress | None = None
        self._task: Any = None

    def event(self, name: str, **fields: Any) -> None:
        doc = {"ts": round(time.time(), 3), "role": self.role, "event": name, **fields}
        if self._progress is not None:
            self._progress.console.print(json.dumps(doc, sort_keys=True))
            return
        self.stream.write(json.dumps(doc, sort_keys=True) + "\n")
        self.stream.flush()

    def start_steps(self, total: int, description: str) -> None:
        if not self.tty:
            return
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("step {task.completed}/{task.total}"),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[rate]} tok/s"),
            TimeRemainingColumn(),
        )
        self._progress.start()
        self._task = self._progress.add_task(description, total=total, loss="-", rate="-")

    def step(self, round_index: int, ev: StepEvent) -> None:
        if self._progress is not None:
            self._progress.update(
                self._task,
                completed=ev.step,
                loss=f"{ev.loss:.4f}",
                rate=f"{ev.tokens_per_s:,.0f}",
            )
            return
        self.event(
            "step",
            round=round_index,
            step=ev.step,
            total=ev.total,
            loss=round(ev.loss, 6),
            tokens_per_s=round(ev.tokens_per_s, 1),
        )

    def stop_steps(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
