"""The devnet's settings: one frozen value built from the command line and checked once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from hypertrain.devnet.errors import DevnetError
from hypertrain.protocol.manifest import INNER_OPTIMIZERS
from hypertrain.protocol.recipe import (
    CHECKPOINT_INTERVAL,
    INNER_OPTIMIZER,
    INNER_STEPS,
    WARM_START_PERCENT,
    warm_start_steps,
)

PRESETS: Final = ("proxy", "tiny", "proxy-moe", "tiny-moe")
# The service's port unless --port names one: when it is taken, any free port is used
# (and the address printed); an explicit --port that is taken is an error.
DEFAULT_PORT: Final = 8000
MAX_ISLANDS: Final = 8
# The islands' inner optimizers a devnet can run: the manifest's inner.name choices.
OPTIMIZERS: Final = INNER_OPTIMIZERS
MICRO_BATCH_SIZE: Final = 2
AUDIT_SEGMENTS: Final = 2  # random segments per audit; the final one is always added
DEFAULT_BUDGETS: Final = (1, 2, 3)  # micro-batches per step, island by island (cycled)
HONEYPOT_BUDGET: Final = 1
# The honeypot island is honest for this many rounds (building escrow), then cheats;
# capped at R - 1 so it cheats at least once (see ``DevnetConfig.honeypot_honest_rounds``).
HONEST_ROUNDS: Final = 2
HONEYPOT_STRATEGIES: Final = ("wrong-samples", "skip-steps", "bad-update")
# Each island joins with its own layout (micro-batches per step from the budgets),
# within the manifest's layout limits, so the islands' token shares differ.
PER_ISLAND_LAYOUTS_SUPPORTED: Final = True
# Seconds per training sample-step of one island while every island trains at once on
# a busy two-core machine (measured: ~0.25 s loaded, ~0.08 s quiet for the proxy).
SAMPLE_STEP_S: Final = {"proxy": 0.2, "proxy-moe": 0.3, "tiny": 0.05, "tiny-moe": 0.08}
REPLAY_SPEEDUP: Final = 4  # the auditor replays alone, while the islands wait
# Phases close as soon as their work is in, so a window is only the bound for a failed
# island or auditor: a wide margin costs nothing and rides out a very busy machine.
WINDOW_MARGIN: Final = 3
# ``--scenario rollback``: a lying auditor passes the honeypot's cheat so it is merged,
# lies about an honest island that disputes and wins, and two standby jurors' re-audits
# bar it and prove the cheat after its merge (docs/devnet.md, "Rollbacks").
SCENARIOS: Final = ("default", "rollback")
STANDBY_JURORS: Final = 2  # the fewest that can bar an auditor without a referee
# Cheats whose update passes the merge's screens, so a lying auditor's ``match`` lets it in
# (``bad-update`` skews the update's norm and may be screened out before any rollback).
ROLLBACK_STRATEGIES: Final = ("wrong-samples", "skip-steps")
# The rollback scenario's shortest dispute window (seconds after the audit window's end,
# so the rest of an early-closed audit window adds to it; at least the audit window): the
# honest island's replay, its game and the standby jurors' re-audits must fit in it, or
# the cheat's round settles on the liar's ``match`` first (a final round's verdicts are
# never set aside).
ROLLBACK_DISPUTE_WINDOW_S: Final = 20
# The rollback scenario's game deadlines (beacon rounds): an honest party's first answer
# waits for its replay of the segment, which a busy two-core machine can take half a
# minute over (the manifest default gives a message 10 rounds).
ROLLBACK_ANSWER_ROUNDS: Final = 60
ROLLBACK_CLOCK_ROUNDS: Final = 600
# Rounds of a rollback scenario run unless --rounds says otherwise: the proof lands a few
# rounds after the cheat (the audit window, then the dispute window), and a round must
# open after the correction for the islands to move onto the corrected model.
ROLLBACK_ROUNDS: Final = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class DevnetConfig:
    """Everything one devnet run needs; defaults give a 3-5 minute run on two cores."""

    rounds: int = 6
    islands: int = 3
    inner_steps: int = INNER_STEPS  # H: the recipe's (protocol.recipe)
    checkpoint_interval: int = CHECKPOINT_INTERVAL  # J; 0: the whole round (J = H)
    preset: str = "proxy"
    seq_len: int = 64
    vocab_size: int = 1024
    port: int | None = None  # None: DEFAULT_PORT, or any free port when that is taken
    state_dir: Path = Path(".devnet")
    cache_dir: Path = Path(".cache/devnet")
    corpus: tuple[Path, ...] = ()
    keep: bool = False
    report: Path | None = None
    exit_when_done: bool = False
    honeypot: str | None = None  # None = chosen at random
    honest_rounds: int | None = None  # honeypot's honest rounds; None = HONEST_ROUNDS, capped
    seed: int = 7
    beacon_period_s: int = 1
    live_view: bool = True
    timeout_s: float = 1800.0
    commit_window_s: int | None = None  # None = sized from the preset and H
    audit_window_s: int | None = None
    island_budgets: tuple[int, ...] = ()  # micro-batches per step per island; () = defaults
    scenario: str = "default"  # or "rollback" (see SCENARIOS)
    warm_start_percent: int = WARM_START_PERCENT  # of all steps, data-parallel before round 0
    baseline: bool = True  # train data-parallel on the run's merged tokens beside it
    chaos_every_rounds: int = 0  # kill and restart a random role every N rounds (0: never)
    chaos_seed: int = 0  # which roles the chaos loop draws, in which order
    resume: bool = False  # go on with the stopped run in state_dir (devnet.resume), if any
    overlap: bool = False  # overlapped rounds (manifest round.overlap)
    optimizer: Literal["adamw", "muon"] = INNER_OPTIMIZER  # the islands' (inner.name)

    def __post_init__(self) -> None:
        if self.checkpoint_interval == 0:  # the recipe's default: one segment, J = H
            object.__setattr__(self, "checkpoint_interval", self.inner_steps)
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
        if self.optimizer not in OPTIMIZERS:
            choices = ", ".join(OPTIMIZERS)
            raise DevnetError(f"--optimizer {self.optimizer!r} is not one of {choices}")
        if self.preset not in PRESETS:
            raise DevnetError(f"--preset {self.preset!r} is not one of {', '.join(PRESETS)}")
        if self.port is not None and not 0 <= self.port <= 65535:
            raise DevnetError(f"--port {self.port} is not a TCP port (0 picks a free one)")
        if self.seq_len < 8 or self.vocab_size < 300:
            raise DevnetError("--seq-len must be >= 8 and --vocab-size >= 300")
        if self.timeout_s <= 0:
            raise DevnetError("--timeout-s must be positive")
        if self.chaos_every_rounds < 0:
            raise DevnetError(f"--chaos-every {self.chaos_every_rounds} must be >= 0 (0: off)")
        if not 0 <= self.warm_start_percent < 100:
            raise DevnetError(f"--warm-start-percent {self.warm_start_percent} must be in [0, 100)")
        if self.honeypot is not None and self.honeypot not in HONEYPOT_STRATEGIES:
            raise DevnetError(
                f"--honeypot {self.honeypot!r} is not one of {', '.join(HONEYPOT_STRATEGIES)}"
            )
        if self.honest_rounds is not None and not 0 <= self.honest_rounds < self.rounds:
            raise DevnetError(
                f"--honest-rounds {self.honest_rounds} must be between 0 and --rounds - 1"
                f" ({self.rounds - 1}), so the honeypot cheats at least once"
            )
        self._check_scenario()
        if self.island_budgets and (
            len(self.island_budgets) != self.islands or min(self.island_budgets) < 1
        ):
            raise DevnetError(
                f"island budgets {list(self.island_budgets)} must be {self.islands} numbers >= 1"
            )

    def _check_scenario(self) -> None:
        if self.scenario not in SCENARIOS:
            raise DevnetError(f"--scenario {self.scenario!r} is not one of {', '.join(SCENARIOS)}")
        if not self.rollback:
            return
        if self.honeypot is not None and self.honeypot not in ROLLBACK_STRATEGIES:
            raise DevnetError(
                f"--scenario rollback needs a cheat the merge lets in"
                f" ({', '.join(ROLLBACK_STRATEGIES)}), not --honeypot {self.honeypot}"
            )
        if self.rounds < self.honeypot_honest_rounds + 3:
            raise DevnetError(
                "--scenario rollback needs --rounds >= --honest-rounds + 3: the cheat's round,"
                " the rounds its proof takes, and one that opens on the corrected model"
            )

    @property
    def warm_start(self) -> dict[str, int] | None:
        """The manifest's warm start: its share of all steps, on every island's samples of
        one step together (the global batch a data-parallel cluster of them would take)."""
        steps = warm_start_steps(self.rounds * self.inner_steps, self.warm_start_percent)
        if steps == 0:
            return None
        return {"steps": steps, "samples_per_step": sum(self.budgets) * MICRO_BATCH_SIZE}

    @property
    def rollback(self) -> bool:
        """The ``rollback`` scenario: a fault proven after its merge, rolled back."""
        return self.scenario == "rollback"

    @property
    def standby_jurors(self) -> int:
        """How many standby jurors run (only the rollback scenario has any)."""
        return STANDBY_JURORS if self.rollback else 0

    @property
    def budgets(self) -> tuple[int, ...]:
        """Micro-batches per step of each honest island, then the honeypot's."""
        honest = self.island_budgets or tuple(
            DEFAULT_BUDGETS[i % len(DEFAULT_BUDGETS)] for i in range(self.islands)
        )
        return (*honest, HONEYPOT_BUDGET)

    @property
    def honeypot_honest_rounds(self) -> int:
        """Rounds the honeypot trains honestly before it cheats (it cheats at least once)."""
        if self.honest_rounds is not None:
            return self.honest_rounds
        if self.rollback:  # the cheat comes early, leaving rounds for the proof and rebase
            return 1
        return min(HONEST_ROUNDS, self.rounds - 1)

    @property
    def probation_rounds(self) -> int:
        """Rounds every island is audited: through the honeypot's first cheat, so it is
        caught; in the rollback scenario every round, so every re-audit has an audit."""
        return self.rounds if self.rollback else self.honeypot_honest_rounds + 1

    @property
    def dispute_window_rounds(self) -> int:
        """Beacon rounds a verdict may be disputed after its audit window. In the rollback
        scenario long enough for the honest island's replay, its game and the standby
        jurors' re-audits before the round settles (``ROLLBACK_DISPUTE_WINDOW_S``; the
        window counts from the audit window's end, so an early close adds to it)."""
        if not self.rollback:
            return 2
        return max(ROLLBACK_DISPUTE_WINDOW_S // self.beacon_period_s, self.windows[1])

    @property
    def max_micro_batches(self) -> int:
        return max(self.budgets)

    def island_layouts(self) -> list[dict[str, int]]:
        """Each island's layout (honeypot last); the budgets differ so token shares differ."""
        return [
            {"dp_ranks": 1, "micro_batches": b, "micro_batch_size": MICRO_BATCH_SIZE}
            for b in self.budgets
        ]

    @property
    def windows(self) -> tuple[int, int]:
        """(commit, audit) windows in beacon rounds.

        The service closes a phase only when its window ends, so these windows, not the
        compute, set the devnet's pace. They are sized for a busy two-core machine
        (``SAMPLE_STEP_S``): the commit window covers the largest island's H steps
        while every island trains at once, plus start-up and upload; the audit window
        covers one auditor replaying up to three J-step segments of every island.
        Slower machines can pass ``--commit-window-s`` and ``--audit-window-s``.
        """
        per_sample = SAMPLE_STEP_S[self.preset]
        largest = max(self.budgets) * MICRO_BATCH_SIZE * self.inner_steps
        replayed = min(AUDIT_SEGMENTS + 1, self.segments)  # k drawn plus the final one
        audited = sum(self.budgets) * MICRO_BATCH_SIZE * replayed * self.checkpoint_interval
        commit = self.commit_window_s or int(WINDOW_MARGIN * (20 + per_sample * largest))
        audit = self.audit_window_s or int(
            WINDOW_MARGIN * (12 + per_sample * audited / REPLAY_SPEEDUP)
        )
        return commit // self.beacon_period_s, audit // self.beacon_period_s

    @property
    def segments(self) -> int:
        return self.inner_steps // self.checkpoint_interval
