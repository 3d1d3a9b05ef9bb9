"""Imports flow downward only: a package imports strictly lower levels, never its own.

Every package and top-level module under ``src/hypertrain`` has a level; an import of a
package at the same level fails unless :data:`SAME_LEVEL` lists the pair with its
reason. Imports are read from the syntax tree, so ``from hypertrain import x``,
relative imports and imports inside functions all count. The honeypot rule is checked
on the import graph: no production module reaches the operator's honeypot tooling,
directly or through other modules. Within the challenge service, its parts (subpackages
and top-level modules) import each other without cycles; and no source file grows past
:data:`MAX_LINES` lines, except the files :data:`OVERSIZED` lists, each capped at its size
when it was listed.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "hypertrain"

LEVEL = {
    "__init__": 0,  # the package itself: its version
    "protocol": 0,
    "data": 1,
    "beacon": 1,
    "ledger": 1,
    "dispute": 1,
    "competition": 1,
    # how a long-lived role process runs (its JSON event lines, its poll loop): the roles
    # share it without importing each other
    "rolekit": 1,
    "trainer": 2,
    # the clients every role (and the evidence they share) uses to reach the services, with
    # the public models both ends of the challenge service read
    "api": 3,
    "relay": 3,
    # what every role derives from public records, and the party's side of a dispute
    "evidence": 4,
    # the challenge service is a party like the roles: no role imports it, it imports none
    "challenge": 5,
    # roles: none imports another
    "aggregator": 5,
    "auditor": 5,
    "evaluator": 5,
    "referee": 5,
    "miner": 5,
    # tooling over the roles
    "devnet": 6,
    "ops": 6,
    "honeypot": 6,
    "cli": 7,  # the single entry point
}
# Same-level imports that are allowed, each with its reason: (importer, imported).
SAME_LEVEL: dict[tuple[str, str], str] = {
    ("competition", "data"): "held-out evaluation pages are drawn with the data's permutation",
}
# Packages that must never pull in torch (directly).
TORCH_FREE = {
    "protocol", "ledger", "beacon", "api", "challenge", "relay", "dispute", "competition"
}  # fmt: skip
# The services and their clients sit above the trainer only so that roles can import
# them: they never import it (the service compares hashes that others compute), nor the
# evidence the roles derive.
SERVICE_FORBIDDEN = {
    "challenge": {"trainer", "evidence"},
    "api": {"trainer"},
    "relay": {"trainer"},
}
# The operator's honeypot tooling wraps production roles; no production code reaches it.
HONEYPOT = "hypertrain.honeypot"


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports_of(path: Path) -> set[str]:
    """Every module name ``path`` imports; ``from a import b`` yields ``a`` and ``a.b``."""
    text = path.read_text(encoding="utf-8")
    return imports_in(text, module_name(path), path.name == "__init__.py")


def imports_in(text: str, importer: str, is_package: bool) -> set[str]:
    tree = ast.parse(text)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, importer, is_package)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def unit_of(name: str) -> str | None:
    """The level-map key of a ``hypertrain`` module name (None outside the package)."""
    parts = name.split(".")
    if parts[0] != "hypertrain":
        return None
    if len(parts) == 1 or parts[1] not in LEVEL:
        return "__init__"
    return parts[1]


def sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def test_every_package_and_module_has_a_level() -> None:
    units = {p.stem if p.is_file() else p.name for p in SRC.iterdir()}
    units = {u for u in units if (SRC / u).is_dir() or (SRC / f"{u}.py").exists()}
    missing = {u for u in units if u not in LEVEL and not u.startswith(("_", "."))}
    assert not missing, f"add to LEVEL: {sorted(missing)}"


def test_imports_flow_strictly_downward() -> None:
    problems = []
    for path in sources():
        here = unit_of(module_name(path))
        assert here is not None
        for name in imports_of(path):
            if name.split(".")[0] == "torch" and here in TORCH_FREE:
                problems.append(f"{path.relative_to(SRC)} imports torch")
            there = unit_of(name)
            if there is None or there == here:
                continue
            if LEVEL[there] > LEVEL[here] or (
                LEVEL[there] == LEVEL[here] and (here, there) not in SAME_LEVEL
            ):
                problems.append(f"{path.relative_to(SRC)} imports {name}")
            if there in SERVICE_FORBIDDEN.get(here, set()):
                problems.append(f"{path.relative_to(SRC)} (a service) imports {name}")
    assert not problems, "\n".join(sorted(set(problems)))


def test_the_checker_sees_every_import_form() -> None:
    """The rule cannot be dodged by spelling: each form below names the auditor."""
    forms = [
        "from hypertrain import auditor",
        "import hypertrain.auditor.runner",
        "from hypertrain.auditor.runner import Auditor",
        "def f():\n    from hypertrain.auditor import runner",
    ]
    for form in forms:
        names = imports_in(form, "hypertrain.miner.probe", False)
        assert any(unit_of(n) == "auditor" for n in names), form
    relative = imports_in("from ..auditor import runner", "hypertrain.miner.probe", False)
    assert "hypertrain.auditor.runner" in relative


@cache
def graph() -> dict[str, frozenset[str]]:
    """Module -> the ``hypertrain`` modules it imports (only names that are modules)."""
    modules = {module_name(p): p for p in sources()}
    return {
        name: frozenset(n for n in imports_of(path) if n in modules and n != name)
        for name, path in modules.items()
    }


def reaches(start: str, target: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name == target or name.startswith(target + "."):
            return True
        if name not in seen:
            seen.add(name)
            todo.extend(graph().get(name, ()))
    return False


def test_no_production_module_reaches_the_honeypot() -> None:
    """Cheats are injected by the operator's tooling; no role, service or entry point
    imports it, directly or through another module (so a miner has no cheat switch)."""
    production = [m for m in graph() if not m.startswith(HONEYPOT)]
    found = [m for m in production if reaches(m, HONEYPOT)]
    assert not found, "\n".join(found)


def test_the_honeypot_reaches_the_miner_through_its_hooks() -> None:
    """The graph check is live: the honeypot island does reach the miner."""
    assert reaches("hypertrain.honeypot.island", "hypertrain.miner")
    assert not reaches("hypertrain.miner.cli", HONEYPOT)


def test_no_module_global_is_rebound() -> None:
    """No code swaps another module's functions: ``vars(m)[k] = v``, ``setattr(m, ...)``
    or ``m.k = v`` on an imported module."""
    problems = []
    for path in sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {
            alias.asname or alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        for node in ast.walk(tree):
            if _rebinds(node, modules):
                problems.append(f"{path.relative_to(SRC)}:{getattr(node, 'lineno', 0)}")
    assert not problems, "\n".join(problems)


def _rebinds(node: ast.AST, modules: set[str]) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
        first = node.args[0]
        return node.func.id == "setattr" and isinstance(first, ast.Name) and first.id in modules
    if not isinstance(node, ast.Assign):
        return False
    for target in node.targets:
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Call):
            func = target.value.func
            if isinstance(func, ast.Name) and func.id in {"vars", "globals"}:
                return True
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            return target.value.id in modules
    return False


# The challenge service's database (the dispute game's tables live in it too): each table
# has one owner, the storage module that reads and writes it and returns typed rows.
DATABASE = "challenge/database.py"  # the connection, its migration runner and the nonces
SCHEMA = "challenge/migrations/"  # the schema's versions name every table
_OWNERS = {
    "challenge/store/rounds_storage.py": "runs rounds roster commits audits verdicts merges"
    " settlements beacons proven_faults merge_corrections late_panels",
    "challenge/store/attestation_storage.py": "tape_attestations",
    "challenge/admission/storage.py": "admission_challenges",
    "challenge/store/competition_storage.py": "competitions compete_commits compete_cycles"
    " compete_scores compete_results",
    "challenge/platform/storage.py": "weights_answers metagraph metagraph_departures",
    "challenge/store/honeypot_storage.py": "honeypot_periods",
    "challenge/dashboard/baseline_storage.py": "run_baselines",
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


# A source file stays short enough to read in one sitting (the house style: modules around 300
# lines, rarely past 500). The files still over the limit are listed with their line
# count when listed as a ceiling, so they cannot grow; an entry goes once its file is
# split (the test fails while a listed file is within the limit, so the list only shrinks).
MAX_LINES = 400
OVERSIZED: dict[str, int] = {}
_SOURCE_SUFFIXES = {".py", ".pyi", ".c", ".js", ".html", ".css"}


def _line_counts() -> dict[str, int]:
    """Every source file under ``src/`` (by path from ``src/``) -> its number of lines."""
    return {
        str(path.relative_to(SRC.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(SRC.parent.rglob("*"))
        if path.suffix in _SOURCE_SUFFIXES and "__pycache__" not in path.parts
    }


def test_no_source_file_grows_past_the_line_limit() -> None:
    counts = _line_counts()
    over = [
        f"{path}: {n} lines (limit {OVERSIZED.get(path, MAX_LINES)})"
        for path, n in counts.items()
        if n > OVERSIZED.get(path, MAX_LINES)
    ]
    assert not over, "split these files:\n" + "\n".join(over)
    done = [path for path in OVERSIZED if counts.get(path, 0) <= MAX_LINES]
    assert not done, f"within {MAX_LINES} lines (or gone) now, remove from OVERSIZED: {done}"


CHALLENGE = "hypertrain.challenge"
# The challenge service's parts import each other in one direction, bottom-up: the
# foundations (errors, ports, deadlines, the metagraph, settings; the database and its
# migrations; the pure settlement and tape rules); the state; the store; the facts;
# settlement; the resources (rounds; admission; disputes; honeypots; competition;
# platform); the lifecycle, which sequences them; the dashboard; routes; the app and its
# entry points. No import closes a cycle.


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
