"""``hypertrain challenge weights`` as an operator types it, against a service on loopback."""

from __future__ import annotations

import pytest

from hypertrain.cli import main
from tests.ops.conftest import LiveService


def test_weights_answers_the_next_epoch_each_time(
    live_service: LiveService, capsys: pytest.CaptureFixture[str]
) -> None:
    token = live_service.admin_token.parent / "internal.token"
    args = ["challenge", "weights", "--service-url", live_service.url]
    assert main([*args, "--internal-token-file", str(token)]) == 0
    assert capsys.readouterr().out.startswith("get_weights epoch 1 (hypertrain):")
    assert main([*args, "--internal-token-file", str(token)]) == 0
    second = capsys.readouterr().out
    assert second.startswith("get_weights epoch 2 (hypertrain):")
    assert "run  hotkey  weight  paid  vested  escrow  burned" in second
    assert main([*args, "--internal-token-file", str(token), "--epoch", "2"]) == 0
    assert capsys.readouterr().out == second  # the first answer of an epoch is final


def test_weights_needs_the_internal_token(
    live_service: LiveService, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = live_service.admin_token  # a real token file, but not the internal one
    argv = ["challenge", "weights", "--service-url", live_service.url]
    assert main([*argv, "--internal-token-file", str(wrong)]) == 1
    assert "401" in capsys.readouterr().err
