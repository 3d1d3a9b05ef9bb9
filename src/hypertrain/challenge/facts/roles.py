"""One key, one role in a run: who may sign what, decided in one table.

A key holds a role of a run because the operator *named* it for that role or because it
already *acted* in it:

* ``aggregator``: named in ``HYPERTRAIN_AGGREGATOR_HOTKEYS``;
* ``tape signer``: signed one of the run's merge tapes;
* ``auditor``: signed one of the run's verdicts;
* ``witness``: named in ``HYPERTRAIN_WITNESS_HOTKEYS``, or attested one of the run's tapes;
* ``evaluator``: named in ``HYPERTRAIN_EVALUATOR_HOTKEYS`` (a competition's scorer);
* ``referee``: named in the run's manifest (``dispute.referees``);
* ``island``: joined the run (its roster).

:data:`BARRED` says, for each act, which held roles refuse it (403 ``role_conflict``):
no key judges its own audit, merges and judges the same round, vouches for its own tape
or pay, rules a dispute whose outcome pays it, or trains in a run it judges, merges,
witnesses or referees. A referee's re-audit is a verdict, so a referee may sign
verdicts; a competition evaluator may train as an island (it judges no training).

A merge tape (and a correction, which is a tape) needs more than no conflict: its
signer must be *named*. With no aggregator key named the service accepts no tape at
all (403 ``no_aggregator_named``), so a key the operator never named, an evaluator
listed as a worker, an auditor that has not yet judged, can never choose who is paid and
the next model by posting first in the merge phase.

Each function takes what it reads, never the service's whole state: the open connection
and the keys named for each role (:func:`named_roles`, from the settings and the run's
manifest).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final, Literal

from hypertrain.challenge.errors import ForbiddenError
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.store import (
    attestation_storage,
    merge_storage,
    roster_storage,
    verdict_storage,
)
from hypertrain.protocol.manifest import RunManifest

Act = Literal["verdict", "merge-tape", "witness", "island", "ruling"]
Held = Literal["aggregator", "tape signer", "auditor", "witness", "evaluator", "referee", "island"]


class RoleConflictError(ForbiddenError):
    """A key signing for a role it may not hold in this run (it holds another one)."""

    code = "role_conflict"


class NoAggregatorNamedError(ForbiddenError):
    """A merge tape on a service that names no aggregator key: nobody may sign one."""

    code = "no_aggregator_named"


# act -> the held roles that refuse it
BARRED: Final[dict[Act, frozenset[Held]]] = {
    "verdict": frozenset({"aggregator", "tape signer", "witness", "evaluator", "island"}),
    "merge-tape": frozenset({"auditor", "witness", "evaluator", "referee", "island"}),
    "witness": frozenset(
        {"aggregator", "tape signer", "auditor", "evaluator", "referee", "island"}
    ),
    "island": frozenset({"aggregator", "tape signer", "auditor", "witness", "referee"}),
    "ruling": frozenset({"aggregator", "tape signer", "witness", "evaluator", "island"}),
}

_WHAT: Final[dict[Held, str]] = {
    "aggregator": "signs the merge tapes of {run} (HYPERTRAIN_AGGREGATOR_HOTKEYS)",
    "tape signer": "signed merge tapes of {run}",
    "auditor": "signed verdicts in {run}",
    "witness": "witnesses the tapes of {run}",
    "evaluator": "is a competition evaluator (HYPERTRAIN_EVALUATOR_HOTKEYS)",
    "referee": "is a referee of {run}",
    "island": "is an island of {run}",
}

_DOING: Final[dict[Act, str]] = {
    "verdict": "sign its verdicts",
    "merge-tape": "sign its merge tapes",
    "witness": "attest its tapes",
    "island": "train in it",
    "ruling": "rule its disputes",
}


@dataclass(frozen=True, slots=True)
class NamedRoles:
    """The keys named for a role: the service's settings and the run's manifest."""

    aggregators: frozenset[str] = frozenset()
    witnesses: frozenset[str] = frozenset()
    evaluators: frozenset[str] = frozenset()
    referees: frozenset[str] = frozenset()


def named_roles(s: Settings, manifest: RunManifest) -> NamedRoles:
    """The keys the operator named for each role of the run of ``manifest``."""
    return NamedRoles(
        aggregators=s.aggregator_hotkeys,
        witnesses=s.witness_hotkeys,
        evaluators=s.evaluator_hotkeys,
        referees=frozenset(manifest.dispute.referees),
    )


def held_roles(
    conn: sqlite3.Connection, named: NamedRoles, run_id: str, signer: str
) -> tuple[Held, ...]:
    """Every role ``signer`` holds in the run, named or acted in, in the table's order."""
    held: list[Held] = []
    if signer in named.aggregators:
        held.append("aggregator")
    if merge_storage.signed_tapes(conn, run_id, signer):
        held.append("tape signer")
    if verdict_storage.signed_verdicts(conn, run_id, signer):
        held.append("auditor")
    if signer in named.witnesses or attestation_storage.has_attested(conn, run_id, signer):
        held.append("witness")
    if signer in named.evaluators:
        held.append("evaluator")
    if signer in named.referees:
        held.append("referee")
    if roster_storage.join_body(conn, run_id, signer) is not None:
        held.append("island")
    return tuple(held)


def check(conn: sqlite3.Connection, named: NamedRoles, run_id: str, signer: str, act: Act) -> None:
    """Refuse ``signer``'s ``act`` in ``run_id`` when a role it holds bars it, and a tape
    from any key not named an aggregator key (see the module docstring)."""
    if act == "merge-tape":
        _check_named_aggregator(named, signer)
    for role in held_roles(conn, named, run_id, signer):
        if role in BARRED[act]:
            what = _WHAT[role].format(run=run_id)
            raise RoleConflictError(f"{signer} {what}: it cannot {_DOING[act]}")


def _check_named_aggregator(named: NamedRoles, signer: str) -> None:
    if not named.aggregators:
        raise NoAggregatorNamedError(
            "this service names no aggregator key, so it accepts no merge tape: restart it"
            " with HYPERTRAIN_AGGREGATOR_HOTKEYS set to the aggregator's SS58 address"
            " (docs/operator.md)"
        )
    if signer not in named.aggregators:
        raise RoleConflictError(
            f"{signer} is not one of the aggregator keys (HYPERTRAIN_AGGREGATOR_HOTKEYS):"
            " it cannot sign merge tapes"
        )
