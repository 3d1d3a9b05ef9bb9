"""A miner sees its money, its weight and its admission terms (public routes only)."""

from __future__ import annotations

import argparse
from pathlib import Path

import httpx
import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.api.models import RosterEntry
from hypertrain.cli import main
from hypertrain.miner.cli import build_parser
from hypertrain.miner.config import config_from_args
from hypertrain.miner.standing import admission_line, money_line, weight_line
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from tests.challenge.helpers import manifest_doc
from tests.ops.conftest import LiveService


def _entry(**fields: int) -> RosterEntry:
    values = {"escrow": 0, "held": 0, "vested": 0, "paid": 0, "burned": 0, **fields}
    return RosterEntry(
        hotkey="5Fk", uid=1, status="probation", device_class="cpu", devices=1,
        first_round=3, probation_until_round=5, commits=1, tokens=10, accused_rounds=0, **values,
    )  # fmt: skip


def test_the_latest_weights_are_public_and_the_stored_answer(live_service: LiveService) -> None:
    with ChallengeClient(live_service.url) as client:
        assert client.latest_weights() is None
        gone = httpx.get(f"{live_service.url}/v1/weights/latest")
        assert gone.status_code == 404 and gone.json()["error"] == "no_weights"
        token = (live_service.admin_token.parent / "internal.token").read_text().strip()
        headers = {"authorization": f"Bearer {token}", "x-platform-challenge-slug": "hypertrain"}
        for epoch in (4, 7):
            answer = httpx.get(
                f"{live_service.url}/internal/v1/get_weights?epoch={epoch}", headers=headers
            )
            assert answer.status_code == 200, answer.text
        latest = client.latest_weights()
    assert latest is not None and latest.epoch == 7
    assert httpx.get(f"{live_service.url}/v1/weights/latest").content == answer.content


def test_status_lines_word_the_public_figures() -> None:
    entry = _entry(escrow=900, held=400, vested=50, paid=30, burned=7)
    assert money_line(entry) == (
        "money (base units): escrow 900 (held 400), vested 50, paid 30, burned 7"
    )
    assert money_line(None).startswith("money: none")
    assert weight_line(None, "5Fk") == "weight: no epoch has been answered yet"


def test_join_prints_the_terms_docs_miner_md_promises() -> None:
    manifest = RunManifest.model_validate(manifest_doc())
    layout = LayoutSpec(dp_ranks=1, micro_batches=2, micro_batch_size=4)
    text = admission_line(manifest, layout, _entry(), "5Fk")
    assert "first round   3" in text and "until round 5" in text
    assert "1 rank(s) × 2 micro-batch(es) × 4 samples = 8 samples per step" in text
    budget = manifest.round.inner_steps * 8
    assert f"budget        {budget} samples per round" in text
    assert "not admitted" in admission_line(manifest, layout, None, "5Fk")


def test_the_miner_takes_btcli_wallet_flags(tmp_path: Path) -> None:
    argv = ["status", "--wallet.name", "w", "--wallet.hotkey", "h", "--wallet.path", str(tmp_path)]
    cfg = config_from_args(build_parser().parse_args(argv))
    assert (cfg.wallet, cfg.hotkey, cfg.wallet_path) == ("w", "h", str(tmp_path))
    assert isinstance(build_parser().parse_args(["status", "--wallet", "w"]), argparse.Namespace)


def test_run_init_lists_its_presets(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "init", "--run-id", "r", "--dataset-dir", ".", "--out", "x", "--preset", "n"])
    assert exited.value.code == 2 and "tiny" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "init", "--help"])
    assert "model preset: 50m, proxy" in capsys.readouterr().out
