"""Imports flow downward only: a package imports strictly lower levels, never its own.

Every package and top-level module under ``src/hypertrain`` has a level; an import of a
package at the same level fails unless :data:`SAME_LEVEL` lists the pair with its
reason. Imports are read from the syntax tree, so ``from hypertrain import x``,
relative imports and imports inside functions all count. The honeypot rule is checked
on the import graph: no production module reaches the operator's honeypot tooling,
directly or through other modules. No source file grows past :data:`MAX_LINES` lines,
except the files :data:`OVERSIZED` lists, each capped at its size when it was listed, and
no test module does either.
The challenge service's own layering (each table has one owner, its parts import each
other without cycles, its resource packages import none of each other) is checked over
this module's import graph in ``tests/challenge/test_layers.py``.
"""

from __future__ import annotations

import ast
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


def test_no_test_module_grows_past_the_line_limit() -> None:
    """What several tests share lives in helper modules split by subject, so no test file
    (test or helper) passes :data:`MAX_LINES` either."""
    tests = Path(__file__).parent
    over = [
        f"{path.relative_to(tests.parent)}: {n} lines (limit {MAX_LINES})"
        for path in sorted(tests.rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    ]
    assert not over, "split these files by subject:\n" + "\n".join(over)
