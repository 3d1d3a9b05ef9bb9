"""miner.toml parsing: sections, flag overrides and every bad-input case."""

from __future__ import annotations

from pathlib import Path

import pytest

from hypertrain.miner.cli import build_parser, main
from hypertrain.miner.config import load_config
from hypertrain.miner.errors import ConfigError
from hypertrain.protocol.identity import write_key_file

GOOD = """
run_id = "run-1"
[network]
service_url = "http://127.0.0.1:8000"
relay_url = "http://127.0.0.1:8470"
[wallet]
name = "miner"
hotkey = "h1"
path = "WALLETS"
[data]
dataset_dir = "data/ds"
"""


def test_sections_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "miner.toml"
    path.write_text(GOOD.replace("WALLETS", str(tmp_path / "wallets")))
    write_key_file(b"\x05" * 32, tmp_path / "wallets" / "miner" / "hotkeys" / "h1")
    cfg = load_config(path, {"device": "cpu", "run_id": None, "poll_s": 2})
    assert cfg.run_id == "run-1" and cfg.wallet == "miner" and cfg.poll_s == 2.0
    assert cfg.load_key().ss58_address
    assert load_config(path, {"run_id": "other"}).run_id == "other"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("run_id = 3", "run_id: Input should be a valid string"),
        ("nonsense = 1", "unknown setting"),
        ("run_id = ", "not valid TOML"),
        ('honeypot = "skip-steps"', "unknown setting"),  # no such switch in the miner
    ],
)
def test_bad_config_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "miner.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_config(path)


def test_missing_settings_and_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match="--service-url"):
        load_config(None).require("service_url")


def test_cli_help_and_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    parser = build_parser()
    for command in ("selfcheck", "join", "run", "watch", "status"):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args([command, "--help"])
        assert exc.value.code == 0
    assert main(["run", "--round", "0", "--follow"]) == 1
    assert "exactly one" in capsys.readouterr().err
    assert main(["status", "--config", str(tmp_path / "no.toml")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_no_honeypot_option_in_the_miner(capsys: pytest.CaptureFixture[str]) -> None:
    """Cheats are injected by the operator's tooling (``hypertrain.honeypot.island``)."""
    parser = build_parser()
    for command in ("run", "join", "watch"):
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        text = capsys.readouterr().out.lower()
        assert "--round" in text or "--region" in text or "--dispute" in text
        assert "honeypot" not in text and "strategy" not in text
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["run", "--follow", "--honeypot", "skip-steps"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --honeypot" in capsys.readouterr().err
