"""A honeypot island: a real ``hypertrain-miner`` with a lie injected by the operator.

``python -m hypertrain.honeypot.island MODE -- MINER-ARGS...`` runs ``hypertrain-miner
MINER-ARGS`` (``run``, ``watch``) in this process, changed in one of two ways:

* ``--strategy NAME [--honest-rounds K]``: honest in rounds ``0 .. K - 1`` (building
  escrow), then the cheat ``NAME`` (``wrong-samples``, ``skip-steps``, ``bad-update``;
  see :mod:`hypertrain.honeypot.cheats`) in every later round.
* ``--perturb STEP:SECTION:INDEX``: the trainer's step is replaced, at global step
  ``STEP``, by the traced step that adds a small constant to the output of operation
  ``INDEX`` of section ``SECTION`` (see :mod:`hypertrain.evidence.trace`). Training, the
  island's own replay and its dispute answers all carry the same change, so its replay
  reproduces its committed leaves and ``watch --follow`` disputes the auditor's
  verdict, which the game must uphold, pinned to that step, section and operation.

The production miner carries no such switch: the change is injected here, by the
operator's tooling.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hypertrain.evidence import party
from hypertrain.evidence.trace import OpRef, traced_step
from hypertrain.honeypot import cheats
from hypertrain.miner import cli as miner_cli
from hypertrain.trainer import segment
from hypertrain.trainer.step import StepStats


def install(where: OpRef) -> None:
    """Make every step ``where.step`` (global) of this process perturbed at ``where``."""
    honest_step, honest_traced = vars(segment)["train_step"], vars(party)["traced_step"]

    def train_step(tensors: Any, step: int, batch: Any, *args: Any, **kwargs: Any) -> StepStats:
        if step != where.step:
            stats: StepStats = honest_step(tensors, step, batch, *args, **kwargs)
            return stats
        kwargs.pop("tracer", None)
        traced_step(tensors, step, batch, *args, perturb=where, **kwargs)
        return StepStats(loss=0.0, grad_norm=0.0)

    def traced(tensors: Any, step: int, *args: Any, **kwargs: Any) -> Any:
        if step == where.step:
            kwargs["perturb"] = where
        return honest_traced(tensors, step, *args, **kwargs)

    vars(segment)["train_step"] = train_step  # run_segment looks the name up at call time
    vars(party)["traced_step"] = traced


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hypertrain.honeypot.island")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--strategy", choices=cheats.STRATEGIES, help="the cheat to inject")
    mode.add_argument("--perturb", help="STEP:SECTION:INDEX (global step)")
    parser.add_argument(
        "--honest-rounds",
        type=int,
        default=0,
        metavar="K",
        help="with --strategy: train rounds 0 .. K-1 honestly, cheat from round K on",
    )
    parser.add_argument("miner_args", nargs=argparse.REMAINDER, help="-- then miner arguments")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.honest_rounds < 0:
        parser.error("--honest-rounds must be >= 0")
    if args.strategy is not None:
        cheats.install(cheats.Schedule(cheats.check_strategy(args.strategy), args.honest_rounds))
    else:
        step, section, index = (int(x) for x in args.perturb.split(":"))
        install(OpRef(step, section, index))
    rest = args.miner_args[1:] if args.miner_args[:1] == ["--"] else args.miner_args
    return miner_cli.main(rest)


if __name__ == "__main__":
    sys.exit(main())
