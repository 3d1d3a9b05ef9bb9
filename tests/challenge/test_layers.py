"""The challenge service's own layering: each table has one owner, its parts import each
other without cycles, and its resource packages import none of each other.

The project-wide rules (levels, the honeypot, the line limit) are in
``tests/test_layering.py``, whose import graph these checks read. Storage: each table of
the service's database is named only by its owner (a storage module), and only storage
modules run SQL. Parts: the subpackages and top-level modules of ``hypertrain.challenge``
import each other in one direction, and a resource (:data:`RESOURCES`) imports only its
own package and the parts below the resources (:data:`BELOW_RESOURCES`).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from tests.test_layering import SRC, graph

# The challenge service's database (the dispute game's tables live in it too): each table
# has one owner, the storage module that reads and writes it and returns typed rows.
DATABASE = "challenge/database.py"  # the connection, its migration runner and the nonces
SCHEMA = "challenge/migrations/"  # the schema's versions name every table
_OWNERS = {
    "challenge/store/rounds_storage.py": "runs rounds roster commits audits verdicts merges"
    " settlements beacons proven_faults merge_corrections late_panels",
    "challenge/store/attestation_storage.py": "tape_attestations",
    "challenge/store/admission_storage.py": "admission_challenges",
    "challenge/store/competition_storage.py": "competitions compete_commits compete_cycles"
    " compete_scores compete_results",
    "challenge/store/platform_storage.py": "weights_answers metagraph metagraph_departures",
    "challenge/store/honeypot_storage.py": "honeypot_periods",
    "challenge/store/baseline_storage.py": "run_baselines",
    DATABASE: "seen_nonces",
    "challenge/store/game_storage.py": "dispute_games dispute_messages dispute_inputs"
    " faulty_auditors reassigned_verdicts verdict_windows",
}
TABLE_OWNER = {table: owner for owner, names in _OWNERS.items() for table in names.split()}
# An owner too large for one module is split by concern into parts; each part may name
# its owner's tables (the rounds' tables: the run's record, the roster, commits,
# audit assignments, verdicts, merge tapes and their corrections, late panels).
_PARTS = {
    "challenge/store/roster_storage.py": "challenge/store/rounds_storage.py",
    "challenge/store/commit_storage.py": "challenge/store/rounds_storage.py",
    "challenge/store/audit_storage.py": "challenge/store/rounds_storage.py",
    "challenge/store/verdict_storage.py": "challenge/store/rounds_storage.py",
    "challenge/store/merge_storage.py": "challenge/store/rounds_storage.py",
    "challenge/store/late_panel_storage.py": "challenge/store/rounds_storage.py",
    # competition mode: cycles and their scores
    "challenge/store/cycle_storage.py": "challenge/store/competition_storage.py",
    # the disputes resource: the games, verdicts set aside and barred auditors, late windows
    "challenge/store/reaudit_storage.py": "challenge/store/game_storage.py",
    "challenge/store/window_storage.py": "challenge/store/game_storage.py",
}
# One fact that joins two resources is one query, named here with the foreign tables
# it may name (and no other SQL of its module may). A verdict's standing (overturned by
# a dispute, set aside for a re-audit, final once no late window is open) is a fact of
# the verdict and its disputes together, defined once for settlement and every view.
_CROSS: dict[tuple[str, str], frozenset[str]] = {
    ("challenge/store/verdict_storage.py", "STANDING_SQL"): frozenset(
        {"dispute_games", "reassigned_verdicts", "verdict_windows"}
    ),
}
_SQL_TABLE = re.compile(r"\b(?:FROM|JOIN|INTO|UPDATE)\s+([a-z_]+)\b")


def _database_modules() -> list[Path]:
    return sorted([*(SRC / "challenge").rglob("*.py"), *(SRC / "dispute").rglob("*.py")])


def _without_cross(rel: str, text: str) -> tuple[str, list[str]]:
    """``text`` without its allowed cross-resource queries (``_CROSS``); problems when
    an allowed query is gone or names a foreign table it is not allowed to."""
    problems = []
    for (module, name), allowed in _CROSS.items():
        if module != rel:
            continue
        found = [
            ast.get_source_segment(text, node.value) or ""
            for node in ast.parse(text).body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ]
        if len(found) != 1:
            problems.append(f"{rel}: the allowed query {name} is not one constant")
            continue
        named = {m.group(1) for m in _SQL_TABLE.finditer(found[0])}
        owner = _PARTS.get(rel, rel)
        foreign = {t for t in named if t in TABLE_OWNER and TABLE_OWNER[t] != owner}
        if foreign != allowed:
            problems.append(f"{rel}: {name} names {sorted(foreign)}, allowed {sorted(allowed)}")
        text = text.replace(found[0], "")
    return text, problems


def foreign_tables(path: Path) -> set[str]:
    """The service tables that SQL in ``path`` names although another module owns them."""
    rel = str(path.relative_to(SRC))
    text, _ = _without_cross(rel, path.read_text(encoding="utf-8"))
    named = {m.group(1) for m in _SQL_TABLE.finditer(text)}
    owner = _PARTS.get(rel, rel)
    schema = rel == DATABASE or rel.startswith(SCHEMA)
    return {t for t in named if t in TABLE_OWNER and TABLE_OWNER[t] != owner and not schema}


def test_each_table_is_named_only_by_its_owner() -> None:
    problems = []
    for path in _database_modules():
        rel = str(path.relative_to(SRC))
        problems += [
            f"{rel} names {t} (owned by {TABLE_OWNER[t]})" for t in sorted(foreign_tables(path))
        ]
    assert not problems, "\n".join(problems)


def test_each_cross_resource_query_names_only_its_tables() -> None:
    """An allowed cross-resource query exists, as one constant, naming exactly the
    foreign tables it is allowed (so the exception cannot quietly grow)."""
    problems = []
    for module, _name in _CROSS:
        problems += _without_cross(module, (SRC / module).read_text(encoding="utf-8"))[1]
    assert not problems, "\n".join(problems)


def test_only_storage_modules_execute_sql() -> None:
    """Outside the storage modules the service runs no SQL."""
    storage = {DATABASE, *_OWNERS, *_PARTS}
    found = [
        str(path.relative_to(SRC))
        for path in _database_modules()
        if ".execute(" in path.read_text(encoding="utf-8")
        and str(path.relative_to(SRC)) not in storage
    ]
    assert found == []


def test_the_owner_check_sees_sql() -> None:
    """The table check is live: a query on another resource's table is found."""
    text = 'conn.execute("SELECT body FROM merges m JOIN commits c ON 1")'
    assert {m.group(1) for m in _SQL_TABLE.finditer(text)} == {"merges", "commits"}


CHALLENGE = "hypertrain.challenge"
# The challenge service's parts import each other in one direction, bottom-up: the
# foundations (errors, ports, deadlines, the metagraph, settings; the database and its
# migrations; the pure settlement and tape rules); the state; the store; the facts;
# settlement; the resources (rounds; admission; disputes; honeypots; competition;
# platform), which import none of each other (:data:`RESOURCES`); the lifecycle, which
# sequences them; the dashboard; routes; the app and its entry points. No import closes
# a cycle.


def _challenge_part(name: str) -> str | None:
    """The subpackage or top-level module of the challenge package ``name`` is in."""
    parts = name.split(".")
    return parts[2] if parts[:2] == CHALLENGE.split(".") and len(parts) > 2 else None


def challenge_parts() -> dict[str, set[str]]:
    """Each part of the challenge package -> the other parts it imports."""
    parts: dict[str, set[str]] = defaultdict(set)
    for name, imported in graph().items():
        here = _challenge_part(name)
        if here is None:
            continue
        parts[here] |= {p for p in map(_challenge_part, imported) if p not in (None, here)}
    return parts


def _path(edges: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A shortest import path from ``start`` to ``goal`` (None: there is none)."""
    came: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        here = todo.pop(0)
        if here == goal:
            path = [here]
            while (back := came[path[-1]]) is not None:
                path.append(back)
            return path[::-1]
        for there in sorted(edges.get(here, ())):
            if there not in came:
                came[there] = here
                todo.append(there)
    return None


def cycles(edges: dict[str, set[str]], allowed: set[tuple[str, str]]) -> list[str]:
    """Each import ``a -> b`` that is not allowed and closes a cycle, as that cycle."""
    kept = {a: {b for b in bs if (a, b) not in allowed} for a, bs in edges.items()}
    found = []
    for a, bs in sorted(kept.items()):
        for b in sorted(bs):
            back = _path(kept, b, a)
            if back is not None:
                found.append(" -> ".join([a, *back]))
    return found


def test_the_challenge_parts_import_without_cycles() -> None:
    found = cycles(challenge_parts(), set())
    assert not found, "import cycles between the challenge package's parts:\n" + "\n".join(found)


def test_the_cycle_check_sees_a_cycle() -> None:
    """The cycle check is live: a loop through three parts is found, and an allowed
    import breaks it."""
    edges = {"rounds": {"disputes"}, "disputes": {"state"}, "state": {"rounds"}}
    assert cycles(edges, set()) == [
        "disputes -> state -> rounds -> disputes",
        "rounds -> disputes -> state -> rounds",
        "state -> rounds -> disputes -> state",
    ]
    assert cycles(edges, {("state", "rounds")}) == []
    assert challenge_parts()["lifecycle"] >= {"state", "rounds", "disputes", "admission"}


# The resource packages import none of each other: what two of them share lives below
# them, and what moves two of them together lives above them, in the lifecycle. Below
# the resources, each part importing only those listed before it: the foundations (the
# errors, the ports, the answer deadlines, the metagraph, the settings, the database and
# its migrations, the pure settlement and tape rules); the state; the store (every
# resource's tables); the facts (the published facts, the jury, the roles, where the
# service stands in time); settlement. Above them: the lifecycle; the dashboard, a view
# over every resource (it reads the rounds' views, the dispute games and the honeypot
# table, and no resource imports it); the routes, their dependencies, the app and its
# entry points.
RESOURCES = frozenset({"rounds", "admission", "disputes", "honeypots", "competition", "platform"})
BELOW_RESOURCES = frozenset(
    {"errors", "ports", "deadlines", "metagraph", "settings", "database", "migrations",
     "rule", "tape_rule", "state", "store", "facts", "settlement"}
)  # fmt: skip
ABOVE_RESOURCES = frozenset(
    {"lifecycle", "dashboard", "routes", "deps", "middleware", "wiring", "app", "cli",
     "weights_cli"}
)  # fmt: skip


def resource_crossings(modules: dict[str, frozenset[str]]) -> list[str]:
    """Each import by a resource's module of a part other than its own package and those
    below the resources (another resource, or a part above them), as one line naming it;
    and each import of a resource by a part below them."""
    found = []
    for name, imported in sorted(modules.items()):
        here = _challenge_part(name)
        for other in sorted(imported):
            there = _challenge_part(other)
            if there is None or there == here:
                continue
            if here in RESOURCES and there in RESOURCES:
                found.append(f"{name} imports {other}: resource {here} imports resource {there}")
            elif here in RESOURCES and there not in BELOW_RESOURCES:
                found.append(f"{name} imports {other}: resource {here} imports {there}, above it")
            elif here in BELOW_RESOURCES and there in RESOURCES:
                found.append(
                    f"{name} imports {other}: {here}, below the resources, imports {there}"
                )
    return found


def test_every_challenge_part_has_a_layer() -> None:
    """A new part of the service is placed below, among or above the resources."""
    parts = {_challenge_part(name) for name in graph()} - {None}
    layers = [BELOW_RESOURCES, RESOURCES, ABOVE_RESOURCES]
    assert not (BELOW_RESOURCES & RESOURCES or RESOURCES & ABOVE_RESOURCES)
    assert not BELOW_RESOURCES & ABOVE_RESOURCES
    missing = sorted(p for p in parts if p is not None and not any(p in s for s in layers))
    assert not missing, f"place in RESOURCES, BELOW_RESOURCES or ABOVE_RESOURCES: {missing}"


def test_the_resources_import_none_of_each_other() -> None:
    found = resource_crossings(graph())
    assert not found, (
        "a resource imports only its own package and the parts below the resources "
        f"{sorted(BELOW_RESOURCES)}: move the shared piece down (store, facts, settlement) "
        "or the sequencing up (lifecycle):\n" + "\n".join(found)
    )


def test_the_resource_check_sees_a_crossing() -> None:
    """The resource check is live: one resource importing another, a resource importing
    the lifecycle and the store importing a resource are each found, by module; imports
    of the layers below and the dashboard's of the resources are not."""
    c = CHALLENGE
    modules = {
        f"{c}.disputes.honeypots": frozenset({f"{c}.admission.leave", f"{c}.store.game_storage"}),
        f"{c}.platform.weights": frozenset({f"{c}.lifecycle.intake", f"{c}.facts.progress"}),
        f"{c}.store.rounds_storage": frozenset({f"{c}.rounds.phases", f"{c}.rule"}),
        f"{c}.dashboard.panels": frozenset({f"{c}.rounds.views", f"{c}.disputes.games"}),
    }
    assert resource_crossings(modules) == [
        f"{c}.disputes.honeypots imports {c}.admission.leave: resource disputes imports"
        " resource admission",
        f"{c}.platform.weights imports {c}.lifecycle.intake: resource platform imports"
        " lifecycle, above it",
        f"{c}.store.rounds_storage imports {c}.rounds.phases: store, below the resources,"
        " imports rounds",
    ]
    parts = challenge_parts()
    assert parts["disputes"] >= {"store", "facts", "settlement"}
    assert parts["dashboard"] >= {"rounds", "disputes", "honeypots"}


# The lowest layers take the narrow pieces a function uses (the open connection, the
# settings, the keys named for each role, the beacon; settlement also the ledger, the
# metagraph view it books at, the run's manifest and the clock's due round), never the
# service's whole state: no module of the store, the facts or settlement imports it.
# Nor does a resource that needs none of the state's own services (its envelope check,
# memo caches, lock, counters): the honeypots take the connection, the run's manifest
# and the verified beacon round (read once every check passed).
TAKE_NO_STATE = ("store", "facts", "settlement", "honeypots")
TAKES_STATE: frozenset[str] = frozenset()


def test_the_narrow_layers_take_the_connection_not_the_state() -> None:
    state = f"{CHALLENGE}.state"
    found = sorted(
        name
        for name, imported in graph().items()
        if _challenge_part(name) in TAKE_NO_STATE and state in imported
    )
    assert found == sorted(TAKES_STATE), (
        f"{', '.join(TAKE_NO_STATE)}: pass the connection (or the settings, the ledger, the "
        "manifest, the due round, the current round) a function uses instead of the state; "
        f"a module that no longer imports it leaves TAKES_STATE: {found}"
    )
