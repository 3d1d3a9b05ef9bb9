"""``hypertrain ledger``: verify, export and inspect a service's ledger.

``verify --state-dir D [--run R]`` rebuilds every balance from the journal and checks
the hash chains, invariants and tables (exit 1 and the first bad entry on failure);
``verify --journal FILE`` re-verifies an exported journal without any database.
``export --state-dir D --out FILE [--run R]`` writes the journal as JSON lines;
``summary --state-dir D --run R`` prints a run's totals as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from hypertrain.ledger.errors import LedgerStorageError
from hypertrain.ledger.ledger import Ledger
from hypertrain.ledger.storage import LEDGER_FILENAME
from hypertrain.ledger.verify import VerifyReport, verify_export


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("ledger", help="verify, export and inspect the reward ledger")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    verify = sub.add_parser("verify", help="rebuild balances from the journal and check it")
    source = verify.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--state-dir", type=Path, help=f"service state directory ({LEDGER_FILENAME})"
    )
    source.add_argument("--journal", type=Path, help="an exported JSON-lines journal instead")
    verify.add_argument("--run", help="check only this run (default: all runs and weights)")
    verify.set_defaults(func=_verify)

    export = sub.add_parser("export", help="write the journal as JSON lines")
    export.add_argument("--state-dir", type=Path, required=True, help="service state directory")
    export.add_argument("--out", type=Path, required=True, help="output file ('-' for stdout)")
    export.add_argument("--run", help="export only this run (default: all runs)")
    export.set_defaults(func=_export)

    show = sub.add_parser("summary", help="print a run's totals as JSON")
    show.add_argument("--state-dir", type=Path, required=True, help="service state directory")
    show.add_argument("--run", required=True, help="run id")
    show.set_defaults(func=_summary)


def _open(state_dir: Path) -> Ledger:
    path = state_dir / LEDGER_FILENAME
    if not path.is_file():
        raise LedgerStorageError(f"no ledger at {path}")
    return Ledger(path)


def _verify(args: argparse.Namespace) -> int:
    report: VerifyReport
    if args.journal is not None:
        report = verify_export(args.journal)
    else:
        with _open(args.state_dir) as ledger:
            report = ledger.verify(args.run)
    sys.stdout.write(report.render() + "\n")
    return 0 if report.ok else 1


def _export(args: argparse.Namespace) -> int:
    with _open(args.state_dir) as ledger:
        if str(args.out) == "-":
            ledger.write_journal(sys.stdout.buffer, args.run)
        else:
            count = ledger.export_journal(args.out, args.run)
            sys.stdout.write(f"wrote {count} entries to {args.out}\n")
    return 0


def _summary(args: argparse.Namespace) -> int:
    with _open(args.state_dir) as ledger:
        doc = dataclasses.asdict(ledger.summary(args.run))
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0
