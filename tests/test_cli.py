from __future__ import annotations

import subprocess
import sys

from hypertrain.cli import GROUPS, _requested_group


def test_group_found_after_global_options() -> None:
    assert _requested_group(["--log-level", "WARNING", "relay", "serve"]) == "relay"
    assert _requested_group(["protocol", "canon", "x"]) == "protocol"
    assert _requested_group(["--help"]) is None


def test_protocol_group_does_not_import_torch() -> None:
    code = (
        "import sys; from hypertrain.cli import build_parser; build_parser('protocol'); "
        "sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_every_group_registers() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hypertrain.cli", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    for group in GROUPS:
        assert group in out.stdout
