"""A honeypot island: a real ``hypertrain-miner`` with a lie injected by the operator.

``python -m hypertrain.honeypot.island MODE -- MINER-ARGS...`` runs ``hypertrain-miner
MINER-ARGS`` (``run``, ``watch``) in this process, changed in one of two ways:

* ``--strategy NAME [--honest-rounds K]``: honest in rounds ``0 .. K - 1`` (building
  escrow), then the cheat ``NAME`` (``wrong-samples``, ``skip-steps``, ``bad-update``;
  see :mod:`hypertrain.honeypot.cheats`) in every later round.
* ``--perturb STEP:SECTION:INDEX``: at global step ``STEP`` the island's step is the
  traced step that adds a small constant to the output of operation ``INDEX`` of
  section ``SECTION`` (:mod:`hypertrain.honeypot.perturb`). Training, the
  island's own replay and its dispute answers all carry the same change, so its replay
  reproduces its committed leaves and ``watch --follow`` disputes the auditor's
  verdict, which the game must uphold, pinned to that step, section and operation.

The production miner carries no such switch: this module hands the miner's ``main``
explicit round hooks (:mod:`hypertrain.miner.hooks`); nothing of the miner is rebound.
"""

from __future__ import annotations

import argparse
import sys

from hypertrain.evidence.trace import OpRef
from hypertrain.honeypot import cheats
from hypertrain.honeypot.perturb import perturbed_ops, perturbed_step
from hypertrain.miner import cli as miner_cli
from hypertrain.miner.hooks import HooksFor, RoundHooks


def perturbed_hooks(where: OpRef) -> HooksFor:
    """Every round: the step whose state counter is ``where.step`` nudged at ``where``,
    in training and in the island's dispute answers alike."""
    hooks = RoundHooks(
        step=perturbed_step(where.step, where),
        ops=perturbed_ops(where.step, where),
        one_process=True,
    )

    def hooks_for(round_index: int) -> RoundHooks:
        return hooks

    return hooks_for


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
        help="with --strategy: train rounds 0 .. K-1 honestly, cheat from round K on (default 0)",
    )
    parser.add_argument("miner_args", nargs=argparse.REMAINDER, help="-- then miner arguments")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.honest_rounds < 0:
        parser.error("--honest-rounds must be >= 0")
    if args.strategy is not None:
        schedule = cheats.Schedule(cheats.check_strategy(args.strategy), args.honest_rounds)
        hooks = cheats.hooks_for(schedule)
    else:
        step, section, index = (int(x) for x in args.perturb.split(":"))
        hooks = perturbed_hooks(OpRef(step, section, index))
    rest = args.miner_args[1:] if args.miner_args[:1] == ["--"] else args.miner_args
    return miner_cli.main(rest, hooks=hooks)


if __name__ == "__main__":
    sys.exit(main())
