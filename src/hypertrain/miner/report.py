"""Progress output: a rich progress bar on a terminal, one JSON line per event otherwise.

The devnet reads the JSON lines (``{"event": ..., "round": ..., ...}``) from stdout,
so every process of the network logs the same way. The reporter also remembers where
the miner is (round, last event, step), which a stop line names (:meth:`Reporter.where`).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any, Final, TextIO

from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from hypertrain.miner.island import StepEvent

# the events of the round being trained (miner.run, miner.start_model); where() names them
TRAINING_EVENTS: Final = frozenset(
    {"waiting", "start_model", "broadcast_refused", "round_start", "resuming", "step"}
    | {"uploaded", "committed", "skipped", "rank_failed"}
)


class Reporter:
    """Structured events; ``step`` drives a progress bar when stdout is a TTY."""

    def __init__(self, role: str, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.role = role
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty() if tty is None else tty
        self._progress: Progress | None = None
        self._task: Any = None
        self._round: int | None = None
        self._last = "started"
        self._step: tuple[int, int] | None = None  # (step, total) of the round's training

    def where(self) -> str:
        """Where the miner is, in words: the round, the step and what it was doing."""
        if self._round is None:
            return "before any round (waiting for one to open)"
        r = self._round
        if self._last == "committed":
            return f"after committing round {r} (waiting for the next round)"
        if self._last == "uploaded":
            return f"in round {r}, after its upload and before its commit"
        if self._step is not None and self._last in ("round_start", "step"):
            step, total = self._step
            return f"in round {r} at step {step} of {total} (training)"
        return f"in round {r} ({self._last.replace('_', ' ')})"

    def _note(self, name: str, fields: dict[str, Any]) -> None:
        if name not in TRAINING_EVENTS:  # audits served, disputes: about earlier rounds
            return
        if isinstance(fields.get("round"), int) and fields["round"] != self._round:
            self._round, self._step = fields["round"], None
        if name == "round_start":
            self._step = (0, int(fields.get("steps", 0)))
        self._last = name

    def event(self, name: str, **fields: Any) -> None:
        self._note(name, fields)
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
        self._note("step", {"round": round_index})
        self._step = (ev.step, ev.total)
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
