"""``hypertrain challenge weights``: the platform's ``get_weights`` call, made by hand.

In production the platform (Cortex) calls ``GET /internal/v1/get_weights`` every epoch
with the internal token and the challenge's slug, and that first answer of an epoch pays
out what has vested. A local network (the devnet, docs/operator.md's recipe) has no
platform, so nothing is ever paid there: ``paid`` stays 0 and miners read "no epoch has
been answered yet". This command makes the same call for one epoch (by default the one
after the newest answered) and prints the answer's weights beside each island's ``paid``
read back from the public roster, so an operator sees ``paid`` move.

Each epoch's first answer is final and stored: calling an epoch again returns the same
bytes, and an epoch before one already answered is refused (409 ``epoch_superseded``).
Against a production service, leave the epochs to the platform.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypertrain.api.client import ChallengeClient
from hypertrain.api.models import RosterEntry, WeightsPublic
from hypertrain.challenge.settings import read_token_file
from hypertrain.protocol.cliargs import add_service_url


def register(sub: Any, default_url: str) -> None:
    """Add ``weights`` to the ``challenge`` group's subcommands."""
    parser = sub.add_parser(
        "weights",
        help="make the platform's get_weights call (a local network has no platform)"
        " and print the weights and each island's paid",
    )
    add_service_url(parser, default=default_url)
    parser.add_argument(
        "--internal-token-file",
        type=Path,
        required=True,
        help="file holding the internal token (CHALLENGE_INTERNAL_TOKEN_FILE of the service)",
    )
    parser.add_argument(
        "--epoch",
        type=int,
        help="the epoch to answer (default: the one after the newest answered, 1 at first)",
    )
    parser.set_defaults(func=_weights)


@dataclass(frozen=True, slots=True)
class Payout:
    """One ``get_weights`` answer and every run's roster read right after it."""

    answer: WeightsPublic
    rosters: dict[str, list[RosterEntry]]


def next_epoch(client: ChallengeClient) -> int:
    """The epoch after the newest one answered (1 when none was)."""
    latest = client.latest_weights()
    return 1 if latest is None else latest.epoch + 1


def pay_epoch(client: ChallengeClient, epoch: int) -> Payout:
    """Answer ``epoch`` as the platform does (slug from ``/version``), then read the rosters."""
    answer = client.get_weights(epoch, client.version().slug)
    rosters = {run.run_id: client.roster(run.run_id) for run in client.runs()}
    return Payout(answer, rosters)


def render(payout: Payout) -> str:
    """The answer's total and one line per island of each run: weight, paid, vested, escrow."""
    a = payout.answer
    lines = [
        f"get_weights epoch {a.epoch} ({a.challenge_slug}): {len(a.weights)} hotkey(s) weighted,"
        f" full share mass {a.full_share_mass:g}"
    ]
    head = ("run", "hotkey", "weight", "paid", "vested", "escrow", "burned")
    rows: list[tuple[str, ...]] = [head]
    for run_id, roster in payout.rosters.items():
        for e in roster:
            weight = f"{a.weights.get(e.hotkey, 0.0):g}"
            figures = (e.paid, e.vested, e.escrow, e.burned)
            rows.append((run_id, e.hotkey, weight, *(str(x) for x in figures)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.append("paid, vested, escrow and burned are in the ledger's base units, over all epochs")
    return "\n".join(lines) + "\n"


def _weights(args: argparse.Namespace) -> int:
    token = read_token_file(args.internal_token_file, "--internal-token-file").reveal()
    with ChallengeClient(args.service_url, internal_token=token) as client:
        epoch = next_epoch(client) if args.epoch is None else args.epoch
        sys.stdout.write(render(pay_epoch(client, epoch)))
    return 0
