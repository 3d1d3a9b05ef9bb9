"""``hypertrain devnet``: the whole network on this machine (``make devnet`` runs it)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hypertrain.devnet import interrupt
from hypertrain.devnet.config import (
    DEFAULT_PORT,
    HONEST_ROUNDS,
    HONEYPOT_STRATEGIES,
    OPTIMIZERS,
    PRESETS,
    ROLLBACK_ROUNDS,
    SCENARIOS,
    DevnetConfig,
)
from hypertrain.protocol.recipe import INNER_OPTIMIZER, INNER_STEPS, WARM_START_PERCENT


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "devnet",
        help="run a whole network on loopback with a live dashboard",
        description="Start a local beacon, the challenge service with its dashboard, a relay, "
        "N islands, a honeypot island, an auditor and the aggregator; train R outer rounds; "
        "print a summary, write a report and export the final model.",
    )
    p.add_argument("--rounds", type=int,
                   help=f"outer rounds to train (default 6; {ROLLBACK_ROUNDS} with --scenario"
                   " rollback)")  # fmt: skip
    p.add_argument("--islands", type=int, default=3, help="honest islands (default 3)")
    p.add_argument(
        "--h",
        dest="inner_steps",
        type=int,
        default=INNER_STEPS,
        help=f"inner steps H per round (default {INNER_STEPS})",
    )
    p.add_argument("--j", dest="checkpoint_interval", type=int, default=0,
                   help="checkpoint interval J (steps between committed state hashes;"
                   " default: H, the whole round)")  # fmt: skip
    p.add_argument(
        "--preset", default="proxy", choices=PRESETS, help="model preset (default proxy)"
    )
    p.add_argument(
        "--seq-len", type=int, default=64, help="tokens per training sample (default 64)"
    )
    p.add_argument(
        "--vocab-size", type=int, default=1024, help="tokenizer vocabulary size (default 1024)"
    )
    p.add_argument(
        "--port",
        type=int,
        help=f"service/dashboard port (default {DEFAULT_PORT}, or any free port when it is"
        " taken; 0 = any free port; a port given here that is taken is an error)",
    )
    p.add_argument(
        "--warm-start-percent", type=int, default=WARM_START_PERCENT,
        help="share of all steps trained data-parallel before round 0 (default"
        " %(default)s; 0: none)",
    )  # fmt: skip
    p.add_argument("--state-dir", type=Path, default=Path(".devnet"),
                   help="where state, logs, report and the exported model go"
                   " (default .devnet)")  # fmt: skip
    p.add_argument("--cache-dir", type=Path, default=Path(".cache/devnet"),
                   help="cache for the prepared tokenizer and dataset"
                   " (default .cache/devnet)")  # fmt: skip
    p.add_argument("--corpus", type=Path, action="append", help="corpus file (repeatable)")
    p.add_argument("--honeypot", choices=HONEYPOT_STRATEGIES,
                   help="honeypot strategy (default: chosen at random)")  # fmt: skip
    p.add_argument("--honest-rounds", type=int, metavar="K",
                   help=f"rounds the honeypot trains honestly before it cheats"
                   f" (default {HONEST_ROUNDS}, at most R - 1)")  # fmt: skip
    p.add_argument("--scenario", choices=SCENARIOS, default="default",
                   help="rollback: a lying auditor lets the honeypot's cheat be merged, loses a"
                   " dispute to an honest island, and standby jurors' re-audits prove the"
                   " cheat after its merge, which is rolled back (docs/devnet.md)")  # fmt: skip
    p.add_argument("--keep", action="store_true", help="keep the state directory at exit")
    p.add_argument("--resume", action="store_true",
                   help="go on with the run a stopped devnet left in --state-dir (--rounds"
                   " counts from round 0); start one when there is none")  # fmt: skip
    p.add_argument(
        "--report", type=Path, help="write the report JSON here (default STATE_DIR/report.json)"
    )
    p.add_argument("--exit-when-done", action="store_true",
                   help="exit after the report instead of keeping the dashboard up")  # fmt: skip
    p.add_argument(
        "--timeout-s",
        type=float,
        default=1800.0,
        help="give up after this many seconds (default 1800)",
    )
    p.add_argument("--chaos-every", type=int, default=0, metavar="N",
                   help="every N rounds, SIGKILL one role at random (service, relay, aggregator,"
                   " auditor, an island, the witness) and restart it on its state (default 0:"
                   " never; the report lists each kill)")  # fmt: skip
    p.add_argument("--chaos-seed", type=int, default=0,
                   help="seed of the chaos loop's draw of roles (default 0)")  # fmt: skip
    p.add_argument("--overlap", action="store_true",
                   help="overlapped rounds: islands train round r + 1 while round r is audited"
                   " and merged (docs/protocol.md, \"Overlapped rounds\")")  # fmt: skip
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=INNER_OPTIMIZER,
                   help="the islands' inner optimizer (default %(default)s, the recipe's;"
                   " muon: Muon on the matrices, AdamW on embeddings and norms)")  # fmt: skip
    p.add_argument("--commit-window-s", type=int, help="seconds islands get to commit a round")
    p.add_argument("--audit-window-s", type=int, help="seconds auditors get to post verdicts")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from hypertrain.devnet.orchestrator import run_devnet

    rounds = args.rounds
    if rounds is None:
        rounds = ROLLBACK_ROUNDS if args.scenario == "rollback" else 6
    cfg = DevnetConfig(
        rounds=rounds,
        islands=args.islands,
        inner_steps=args.inner_steps,
        checkpoint_interval=args.checkpoint_interval,
        preset=args.preset,
        seq_len=args.seq_len,
        vocab_size=args.vocab_size,
        port=args.port,
        state_dir=args.state_dir,
        cache_dir=args.cache_dir,
        corpus=tuple(args.corpus or ()),
        honeypot=args.honeypot,
        honest_rounds=args.honest_rounds,
        keep=args.keep,
        resume=args.resume,
        report=args.report,
        exit_when_done=args.exit_when_done,
        timeout_s=args.timeout_s,
        commit_window_s=args.commit_window_s,
        audit_window_s=args.audit_window_s,
        scenario=args.scenario,
        warm_start_percent=args.warm_start_percent,
        chaos_every_rounds=args.chaos_every,
        chaos_seed=args.chaos_seed,
        overlap=args.overlap,
        optimizer=args.optimizer,
    )
    interrupt.install()  # Ctrl-C and SIGTERM stop it, even when one interrupt is lost
    return run_devnet(cfg)
