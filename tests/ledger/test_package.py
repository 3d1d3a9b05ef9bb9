"""The ledger sits just above the protocol layer and never loads torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import hypertrain.ledger

PACKAGE_DIR = Path(hypertrain.ledger.__file__).parent


def test_imports_only_protocol_and_itself() -> None:
    for module in PACKAGE_DIR.glob("*.py"):
        tree = ast.parse(module.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                name = node.module
            elif isinstance(node, ast.Import):
                name = node.names[0].name
            else:
                continue
            if name.startswith("hypertrain"):
                assert name.startswith(("hypertrain.ledger", "hypertrain.protocol")), (
                    f"{module.name} imports {name}"
                )


def test_never_imports_torch() -> None:
    code = (
        "import sys, hypertrain.ledger, hypertrain.ledger.cli;"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
