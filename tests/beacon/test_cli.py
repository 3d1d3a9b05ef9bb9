from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hypertrain.beacon.chain import QUICKNET
from hypertrain.beacon.local import local_chain
from hypertrain.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_verify_prints_randomness(
    vectors: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    b = vectors["beacons"][3]
    code, out, _ = run(["beacon", "verify", str(b["round"]), b["signature"]], capsys)
    assert code == 0 and out.strip() == b["randomness"]


@pytest.mark.parametrize(
    "round_number, signature, reason",
    [
        ("2", None, "forged"),
        ("1", "zz", "malformed"),
        ("1", "c0" + "00" * 47, "identity_point"),
        ("1", "c0" + "00" * 46 + "01", "non_canonical"),
        ("1", "80" + "00" * 46 + "04", "not_in_subgroup"),
        ("1", "ab" * 47, "malformed"),
    ],
)
def test_verify_says_why(
    vectors: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    round_number: str,
    signature: str | None,
    reason: str,
) -> None:
    sig = signature or vectors["beacons"][0]["signature"]
    code, out, _ = run(["beacon", "verify", round_number, sig], capsys)
    assert code == 1 and out.startswith(f"REJECTED ({reason}):")


def test_verify_with_other_chain_info(
    vectors: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "info.json"
    path.write_text(json.dumps(local_chain(b"\x00" * 31 + b"\x09", 1, 0, "x").to_json()))
    b = vectors["beacons"][0]
    code, out, _ = run(["beacon", "verify", "1", b["signature"], "--chain-info", str(path)], capsys)
    assert code == 1 and "forged" in out
    path.write_text("{")
    code, _, err = run(["beacon", "verify", "1", b["signature"], "--chain-info", str(path)], capsys)
    assert code == 1 and err.startswith("error: bad_chain_info")


def test_time_and_round_at(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["beacon", "time", "123"], capsys)[1] == "1692803733 2023-08-23T15:15:33Z\n"
    assert run(["beacon", "round-at", "1692803733"], capsys)[1] == "123\n"
    assert run(["beacon", "round-at", "2023-08-23T15:15:35Z"], capsys)[1] == "123\n"
    assert run(["beacon", "round-at", "2023-08-23T17:15:35+02:00"], capsys)[1] == "123\n"
    assert int(run(["beacon", "round-at", "now"], capsys)[1]) > 30_000_000
    code, _, err = run(["beacon", "round-at", "yesterday"], capsys)
    assert code == 1 and "neither unix seconds nor ISO 8601" in err
    code, _, err = run(["beacon", "round-at", "2023-08-23T15:15:35"], capsys)
    assert code == 1 and "timezone" in err
    code, _, err = run(["beacon", "time", "0"], capsys)
    assert code == 1 and "rounds start at 1" in err


def test_get_from_local_endpoint(
    scripted_server: Any, vectors: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.beacon.conftest import quicknet_server

    server = quicknet_server(scripted_server(), vectors)
    code, out, _ = run(["beacon", "get", "3", "--endpoint", server.url], capsys)
    assert code == 0 and json.loads(out)["randomness"] == vectors["beacons"][2]["randomness"]
    assert QUICKNET.chain_hash_hex in server.hits[0]


def test_help_reads(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["beacon", "--help"], ["beacon", "serve", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert "usage:" in capsys.readouterr().out
