"""Imports flow downward only: a package may import its own level or below."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "hypertrain"

LEVEL = {
    "protocol": 0,
    "data": 1,
    "beacon": 1,
    "ledger": 1,
    "dispute": 1,
    "competition": 1,
    "trainer": 2,
    "challenge": 3,
    "aggregator": 3,
    "auditor": 3,
    "evaluator": 3,
    "relay": 3,
    "referee": 3,
    "miner": 4,
    "devnet": 5,
    "ops": 5,
    "honeypot": 5,
}
# Packages that must never pull in torch (directly).
TORCH_FREE = {"protocol", "ledger", "beacon", "challenge", "relay", "dispute", "competition"}
# The two services share level 3 with the roles that call them, but never import a
# role (or the trainer, which the level rule alone would allow), nor each other.
SERVICE_FORBIDDEN = {
    "challenge": {"trainer", "aggregator", "auditor", "relay", "evaluator"},
    "relay": {"trainer", "aggregator", "auditor", "challenge"},
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_imports_flow_downward() -> None:
    problems = []
    for package, level in LEVEL.items():
        for path in (SRC / package).rglob("*.py") if (SRC / package).exists() else []:
            for name in imports_of(path):
                parts = name.split(".")
                if parts[0] == "torch" and package in TORCH_FREE:
                    problems.append(f"{path.relative_to(SRC)} imports torch")
                if parts[0] != "hypertrain" or len(parts) < 2 or parts[1] not in LEVEL:
                    continue
                if LEVEL[parts[1]] > level:
                    problems.append(f"{path.relative_to(SRC)} imports {name}")
    assert not problems, "\n".join(problems)


def test_services_import_no_roles() -> None:
    problems = []
    for package, forbidden in SERVICE_FORBIDDEN.items():
        for path in (SRC / package).rglob("*.py"):
            for name in imports_of(path):
                parts = name.split(".")
                if parts[0] == "hypertrain" and len(parts) > 1 and parts[1] in forbidden:
                    problems.append(f"{path.relative_to(SRC)} imports {name}")
    assert not problems, "\n".join(problems)


# The operator's honeypot tooling wraps production roles; no production code imports it.
HONEYPOT_IMPORTERS = {"honeypot", "devnet"}


def test_production_code_imports_no_honeypot() -> None:
    problems = []
    for path in SRC.rglob("*.py"):
        package = path.relative_to(SRC).parts[0]
        if package in HONEYPOT_IMPORTERS:
            continue
        for name in imports_of(path):
            if name == "hypertrain.honeypot" or name.startswith("hypertrain.honeypot."):
                problems.append(f"{path.relative_to(SRC)} imports {name}")
    assert not problems, "\n".join(problems)


def test_the_miner_carries_no_honeypot_switch() -> None:
    """Cheats are injected by the operator's tooling, never options of the miner."""
    found = [
        f"{path.relative_to(SRC)}:{n}"
        for path in (SRC / "miner").rglob("*.py")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "honeypot" in line.lower()
    ]
    assert not found, "\n".join(found)
