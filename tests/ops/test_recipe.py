"""The local-network recipe of docs/operator.md, extracted from the doc and run verbatim."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "operator.md"
MARKER = "<!-- recipe:local-network -->"


def block(doc: Path, marker: str) -> str:
    """The bash block right after ``marker`` in ``doc``."""
    text = doc.read_text(encoding="utf-8")
    after = text.split(marker, 1)[1].lstrip()
    assert after.startswith("```bash\n"), f"a bash block must follow {marker} in {doc.name}"
    return after[len("```bash\n") :].split("\n```", 1)[0] + "\n"


def recipe() -> str:
    """The bash block right after the marker in docs/operator.md."""
    return block(DOC, MARKER)


def test_the_miner_and_auditor_pages_show_the_recipes_own_commands() -> None:
    """What docs/miner.md and docs/auditor.md show for a local network is, line for line,
    what the recipe runs (and so what test_recipe_runs_verbatim runs)."""
    whole = recipe()
    for page, marker in (("miner.md", "<!-- recipe:islands -->"),
                         ("auditor.md", "<!-- recipe:auditor -->")):  # fmt: skip
        shown = block(ROOT / "docs" / page, marker)
        assert shown in whole, f"docs/{page} shows commands the recipe does not run"


def _ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def test_the_recipe_is_one_self_stopping_bash_block() -> None:
    block = recipe()
    assert "trap " in block and "--last-round $((ROUNDS - 1))" in block and "127.0.0.1" in block
    assert ': "${ROUNDS:=2}"' in block  # two rounds by default; ROUNDS=0 keeps it up
    assert "--ready-file service/ready.json" in block
    assert subprocess.run(["bash", "-n"], input=block, text=True, check=False).returncode == 0


@pytest.mark.slow
def test_recipe_runs_verbatim(tmp_path: Path) -> None:
    script = tmp_path / "recipe.sh"
    script.write_text(recipe(), encoding="utf-8")
    work = tmp_path / "net"
    for attempt in range(3):  # free ports are picked here; a port taken meanwhile is retried
        beacon, service, relay, data = _ports(4)
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "W": str(work / str(attempt)),
            "CORPUS": str(ROOT / "tests" / "assets" / "tinyshakespeare.txt"),
            "BEACON_PORT": str(beacon),
            "SERVICE_PORT": str(service),
            "RELAY_PORT": str(relay),
            "DATA_PORT": str(data),
            "HF_HUB_OFFLINE": "1",
        }
        done = subprocess.run(
            ["bash", str(script)],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            start_new_session=True,
        )
        logs = work / str(attempt) / "logs"
        if done.returncode != 0 and "address already in use" in _all_logs(logs).lower():
            continue
        break
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:] + _all_logs(logs)
    out = done.stdout
    assert "created run local" in out and "coordinator  5" in out
    assert '"round":1' in out.replace(" ", "")  # the loss of both rounds, from the service
    model = work / str(attempt) / "model"
    assert "exported round 1 of local" in out
    names = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
    assert names <= {p.name for p in model.iterdir()}
    tapes = sorted((work / str(attempt) / "aggregator" / "tapes").glob("*.json"))
    assert [t.name for t in tapes] == ["000000.json", "000001.json"]
    # a service at rest writes a line per phase, not per request
    service_lines = (logs / "service.log").read_text().splitlines()
    assert len(service_lines) < 60, "\n".join(service_lines[:80])
    assert not any("GET /" in line for line in service_lines)


def _all_logs(logs: Path) -> str:
    if not logs.is_dir():
        return ""
    return "".join(f"\n--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(logs.glob("*.log")))
