"""The devnet's settings: one frozen value built from the command line and checked once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from hypertrain.devnet.errors import DevnetError

PRESETS: Final = ("proxy", "tiny", "proxy-moe", "tiny-moe")
MAX_ISLANDS: Final = 8
MICRO_BATCH_SIZE: Final = 4
DEFAULT_BUDGETS: Final = (1, 2, 3)  # micro-batches per step, island by island (cycled)
# Islands cannot yet train with a layout of their own: admission requires the run's
# samples per step from everyone. Until the challenge, miner and auditor accept
# per-island layouts, the devnet plans them (report, docs) but does not pass them.
PER_ISLAND_LAYOUTS_SUPPORTED: Final = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DevnetConfig:
    """Everything one devnet run needs; defaults give a 3-5 minute run on two cores."""

    rounds: int = 4
    islands: int = 3
    inner_steps: int = 16  # H
    checkpoint_interval: int = 4  # J
    preset: str = "proxy"
    seq_len: int = 64
    vocab_size: int = 1024
    port: int = 8000
    state_dir: Path = Path(".devnet")
    cache_dir: Path = Path(".cache/devnet")
    corpus: tuple[Path, ...] = ()
    keep: bool = False
    report: Path | None = None
    exit_when_done: bool = False
    honeypot: str | None = None  # None = chosen at random
    seed: int = 7
    beacon_period_s: int = 1
    live_view: bool = True
    timeout_s: float = 1800.0
    commit_window_s: int | None = None  # None = sized from the preset and H
    audit_window_s: int | None = None
    island_budgets: tuple[int, ...] = ()  # micro-batches per step per island; () = defaults

    def __post_init__(self) -> None:
        if not 1 <= self.rounds <= 1000:
            raise DevnetError(f"--rounds {self.rounds} must be between 1 and 1000")
        if not 1 <= self.islands <= MAX_ISLANDS:
            raise DevnetError(f"--islands {self.islands} must be between 1 and {MAX_ISLANDS}")
        if self.checkpoint_interval < 1 or self.inner_steps < self.checkpoint_interval:
            raise DevnetError(f"--j {self.checkpoint_interval} must be between 1 and --h")
        if self.inner_steps % self.checkpoint_interval:
            raise DevnetError(
                f"--h {self.inner_steps} must be a multiple of --j {self.checkpoint_interval}"
            )
        if self.preset not in PRESETS:
            raise DevnetError(f"--preset {self.preset!r} is not one of {', '.join(PRESETS)}")
        if not 0 <= self.port <= 65535:
            raise DevnetError(f"--port {self.port} is not a TCP port (0 picks a free one)")
        if self.seq_len < 8 or self.vocab_size < 300:
            raise DevnetError("--seq-len must be >= 8 and --vocab-size >= 300")
        if self.timeout_s <= 0:
            raise DevnetError("--timeout-s must be positive")
        if self.island_budgets and (
            len(self.island_budgets) != self.islands or min(self.island_budgets) < 1
        ):
            raise DevnetError(
                f"island budgets {list(self.island_budgets)} must be {self.islands} numbers >= 1"
            )

    def island_layouts(self) -> list[dict[str, int]]:
        """Each honest island's planned layout; the budgets differ so token shares differ."""
        budgets = self.island_budgets or tuple(
            DEFAULT_BUDGETS[i % len(DEFAULT_BUDGETS)] for i in range(self.islands)
        )
        return [
            {"dp_ranks": 1, "micro_batches": b, "micro_batch_size": MICRO_BATCH_SIZE}
            for b in budgets
        ]

    @property
    def windows(self) -> tuple[int, int]:
        """(commit, audit) windows in beacon rounds.

        The service closes a phase only when its window ends, so these windows, not the
        compute, set the devnet's pace. They are sized for a busy two-core machine: all
        islands train H steps at once (measured about 0.3-0.5 s per proxy step each
        with the cores shared), and one auditor replays every island's sampled
        segments in turn. Slower machines can pass ``--commit-window-s`` and
        ``--audit-window-s``.
        """
        per_step = 0.5 if self.preset.startswith("tiny") else 0.75
        commit = self.commit_window_s or int(15 + per_step * self.inner_steps)
        audit = self.audit_window_s or int(12 + per_step * self.inner_steps)
        return commit // self.beacon_period_s, audit // self.beacon_period_s

    @property
    def segments(self) -> int:
        return self.inner_steps // self.checkpoint_interval
