"""The one place an island's :class:`TrainConfig` for round ``r`` is built.

The learning-rate schedule follows the run's global step ``round_index * H + local step``
(``trainer.segment``). A caller that builds the config itself and forgets ``round_index``
trains every round at the schedule's step 0 (the warmup's first rate) without any error:
the parity harness once did exactly that. Every caller that trains or replays a round (the
miner, its ranks, the auditor, the dispute parties and the parity simulator) goes through
:func:`island_train_config`, whose ``round_index`` has no default.
"""

from __future__ import annotations

from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.segment import TrainConfig


class RoundIndexError(TrainerError):
    """A round index that is not a non-negative integer."""


def island_train_config(
    manifest: RunManifest,
    round_index: int,
    *,
    layout: LayoutSpec | None = None,
    device: str = "cpu",
) -> TrainConfig:
    """The config one island trains (or an auditor replays) round ``round_index`` with:
    ``layout`` is the island's admitted layout (default: the run's)."""
    if isinstance(round_index, bool) or not isinstance(round_index, int) or round_index < 0:
        raise RoundIndexError(f"round_index must be a non-negative int, got {round_index!r}")
    return TrainConfig.from_manifest(manifest, device, layout=layout, round_index=round_index)
