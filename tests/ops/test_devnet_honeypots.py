"""The devnet commits to its honeypot list in the manifest and reveals it only at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypertrain.cli import main
from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.honeypots import committed, honeypot_list, reveal
from hypertrain.protocol.honeypots import commitment
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from tests.challenge.helpers import manifest_doc
from tests.ops.conftest import LiveService


def test_the_commitment_hides_the_list_and_binds_it() -> None:
    hotkey = Hotkey.from_seed(bytes([9]) * 32).ss58_address
    first, second = honeypot_list(hotkey, "skip-steps"), honeypot_list(hotkey, "skip-steps")
    assert first.salt != second.salt and commitment(first) != commitment(second)
    doc = committed(manifest_doc(), first, reveal_round=1)
    spec = RunManifest.model_validate(doc).honeypots
    assert spec.commitment == commitment(first) and spec.reveal_round == 1


def test_a_reveal_before_the_reveal_round_is_final_is_refused(
    live_service: LiveService, tmp_path: Path
) -> None:
    hotkey = Hotkey.from_seed(bytes([9]) * 32).ss58_address
    honeypots = honeypot_list(hotkey, "bad-update")
    manifest = tmp_path / "run.json"
    manifest.write_text(json.dumps(committed(manifest_doc(), honeypots, reveal_round=0)))
    argv = ["challenge", "create-run", "--service-url", live_service.url]
    argv += ["--admin-token-file", str(live_service.admin_token), "--manifest", str(manifest)]
    assert main(argv) == 0
    token = live_service.admin_token.read_text().strip()
    with pytest.raises(DevnetError, match="round 0 is final"):
        reveal(live_service.url, "run-1", token, honeypots)
    other = honeypot_list(hotkey, "bad-update")  # another salt: not what was committed
    with pytest.raises(DevnetError, match="refused the honeypot reveal"):
        reveal(live_service.url, "run-1", token, other)
