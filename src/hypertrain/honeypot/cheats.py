"""The cheats of the operator's honeypot islands, and how they get into a real miner.

Each strategy breaks a round in a way only byte comparison can reveal, so a devnet or
test can prove the audits work:

* ``wrong-samples``: train on other (valid, root-verified) samples than assigned.
* ``skip-steps``: skip the last step of every segment (``J - 1`` steps per segment).
* ``bad-update``: train honestly but upload an update that is not the compressed
  delta of the final state (the delta is taken against scaled start parameters).

The production miner carries no switch for any of this. :func:`install` swaps, in this
process, the functions the miner looks up at call time (``load_samples``,
``build_update`` and ``launch_ranks`` in :mod:`hypertrain.miner.run`, ``run_segment``
in :mod:`hypertrain.miner.island`, ``run_round`` in :mod:`hypertrain.miner.actions`)
for wrappers that cheat from round ``honest_rounds`` on: before that the island is
honest and builds escrow, so a caught fault shows what it costs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, Literal

from torch import Tensor

from hypertrain.miner import actions, island, run
from hypertrain.miner.errors import ConfigError
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.state import TrainState
from hypertrain.trainer.step import StepStats

Strategy = Literal["wrong-samples", "skip-steps", "bad-update"]
STRATEGIES: Final[tuple[Strategy, ...]] = ("wrong-samples", "skip-steps", "bad-update")
START_SKEW: Final = 1.01  # bad-update: the factor on the start parameters of the delta


def check_strategy(name: str) -> Strategy:
    for strategy in STRATEGIES:
        if name == strategy:
            return strategy
    raise ValueError(f"unknown honeypot strategy {name!r}; choose from {', '.join(STRATEGIES)}")


def wrong_ids(ids: Sequence[int], sample_count: int) -> list[int]:
    """``wrong-samples``: the ids trained instead of the assigned ones."""
    return [(i + 1) % sample_count for i in ids]


def skipped(local_step: int, interval: int) -> bool:
    """``skip-steps``: whether the step is left out (the last of each segment)."""
    return local_step % interval == interval - 1


def tamper_start(start: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """``bad-update``: the start parameters the uploaded delta is computed against."""
    return {name: t * START_SKEW for name, t in start.items()}


@dataclass(slots=True)
class Schedule:
    """Honest in rounds ``0 .. honest_rounds - 1``, then ``strategy`` in every round."""

    strategy: Strategy
    honest_rounds: int = 0
    round: int | None = None  # the round the miner is working on (set by ``run_round``)

    def __post_init__(self) -> None:
        if self.honest_rounds < 0:
            raise ValueError(f"honest rounds must be >= 0, got {self.honest_rounds}")

    def cheats(self, round_index: int | None) -> bool:
        return round_index is not None and round_index >= self.honest_rounds

    def active(self, strategy: Strategy, round_index: int | None) -> bool:
        return self.strategy == strategy and self.cheats(round_index)


def _wrappers(schedule: Schedule, honest: dict[str, Any]) -> dict[str, Any]:
    load_samples, build_update = honest["load_samples"], honest["build_update"]
    run_segment, launch_ranks = honest["run_segment"], honest["launch_ranks"]
    run_round = honest["run_round"]
    last_loss: list[float] = [0.0]

    def load_samples_(dataset: Any, ids: Sequence[int]) -> Any:
        if schedule.active("wrong-samples", schedule.round):
            ids = wrong_ids(ids, dataset.sample_count)
        return load_samples(dataset, ids)

    def build_update_(start: Mapping[str, Tensor], end: TrainState, compression: Any) -> Any:
        if schedule.active("bad-update", schedule.round):
            start = tamper_start(start)
        return build_update(start, end, compression)

    def run_segment_(state: TrainState, config: TrainConfig, *args: Any, **kwargs: Any) -> Any:
        step = kwargs.get("local_step")
        if (
            schedule.active("skip-steps", config.round_index)
            and isinstance(step, int)
            and skipped(step, config.checkpoint_interval)
        ):
            stats = kwargs.get("stats")
            if stats is not None:
                stats.append(StepStats(loss=last_loss[0], grad_norm=0.0))
            return state
        out = run_segment(state, config, *args, **kwargs)
        stats = kwargs.get("stats")
        if stats:
            last_loss[0] = stats[-1].loss
        return out

    def launch_ranks_(cfg: Any, manifest: Any, config: TrainConfig, *args: Any) -> None:
        if (cfg.ranks or config.layout.dp_ranks) != 1:
            raise ConfigError("a honeypot island trains in one process (ranks = 1)")
        launch_ranks(cfg, manifest, config, *args)

    def run_round_(ctx: Any, key: Any, index: int, reporter: Any, **kwargs: Any) -> Any:
        schedule.round = index
        reporter.event(
            "honeypot", round=index, strategy=schedule.strategy, cheats=schedule.cheats(index)
        )
        try:
            return run_round(ctx, key, index, reporter, **kwargs)
        finally:
            schedule.round = None

    return {
        "load_samples": load_samples_,
        "build_update": build_update_,
        "run_segment": run_segment_,
        "launch_ranks": launch_ranks_,
        "run_round": run_round_,
    }


_HOMES: Final[dict[str, ModuleType]] = {
    "load_samples": run,
    "build_update": run,
    "launch_ranks": run,
    "run_segment": island,
    "run_round": actions,
}


def install(schedule: Schedule) -> Callable[[], None]:
    """Make the miner of this process follow ``schedule``; returns the undo."""
    honest = {name: vars(home)[name] for name, home in _HOMES.items()}  # KeyError: renamed
    for name, fn in _wrappers(schedule, honest).items():
        vars(_HOMES[name])[name] = fn

    def undo() -> None:
        for name, fn in honest.items():
            vars(_HOMES[name])[name] = fn

    return undo


@contextlib.contextmanager
def installed(schedule: Schedule) -> Iterator[Schedule]:
    """:func:`install` for the duration of a block (tests)."""
    undo = install(schedule)
    try:
        yield schedule
    finally:
        undo()
