"""``hypertrain-miner leave`` against the real service on loopback: signed, then final."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.miner.cli import main
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import write_key_file
from tests.challenge.helpers import bearer, join_body, manifest_doc
from tests.ops.conftest import LiveService, live_service  # noqa: F401


def test_the_miner_leaves_and_a_second_leave_is_refused(
    live_service: LiveService,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = live_service.url
    created = httpx.post(
        f"{url}/admin/v1/runs", json={"manifest": manifest_doc()}, headers=bearer("admin")
    )
    assert created.status_code == 200, created.text
    key = write_key_file(bytes([1]) * 32, tmp_path / "miner.key")  # a registered miner
    with ChallengeClient(url) as client:
        env = seal(key, domain="join", run_id="run-1", body=join_body(), expiry_round=50_000)
        assert client.join(env).admitted
    argv = ["leave", "--service-url", url, "--run-id", "run-1", "--key-file"]
    argv += [str(tmp_path / "miner.key"), "--reason", "moving hardware"]
    assert main(argv) == 0
    answer = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (answer["hotkey"], answer["left_round"]) == (key.ss58_address, 0)
    assert main(argv) == 1  # leaving is final: the service refuses the second one
    assert "HTTP 409" in capsys.readouterr().err
    with ChallengeClient(url) as client:
        entry = next(r for r in client.roster("run-1") if r.hotkey == key.ss58_address)
    assert (entry.status, entry.left_round) == ("left", 0)
