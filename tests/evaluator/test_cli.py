"""``hypertrain competition evaluate --follow`` waits for a service that is away at start.

A service that gives no answer or fails (5xx) is ``service_unreachable`` and waited for
(``rolekit.when_up``); a refusal (a bad worker token: 401) still ends the command, and
the one-shot command fails at once.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from hypertrain.api.competition import CompetitionClient
from hypertrain.api.errors import ServiceError
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.evaluator.cli import checked_spec
from hypertrain.evaluator.runner import EvaluatorRefusedError
from tests.competition.world import spec_doc

AWAY = ServiceError("cannot reach the challenge service at http://svc", status=0)


class FakeClient:
    """Raises each queued error of ``competition`` and ``task`` in turn, then answers."""

    base_url = "http://svc"

    def __init__(self, spec: CompetitionSpec, **errors: list[Exception]) -> None:
        self.spec, self.errors = spec, errors

    def _raise(self, name: str) -> None:
        if self.errors.get(name):
            raise self.errors[name].pop(0)

    def competition(self, competition_id: str) -> CompetitionSpec:
        self._raise("competition")
        return self.spec

    def task(self, competition_id: str, hotkey: str) -> Any:
        self._raise("task")


def _spec() -> CompetitionSpec:
    doc = spec_doc()
    doc["evaluators"] = []
    return CompetitionSpec.model_validate(doc)


def test_follow_waits_for_the_service_then_checks_the_token(
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = _spec()
    client = FakeClient(spec, competition=[AWAY], task=[ServiceError("HTTP 503", status=503)])
    assert checked_spec(cast(CompetitionClient, client), "c", "hk", follow=True) is spec
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["event"], e["retry_in_s"]) for e in events] == [
        ("service_unreachable", 1.0), ("service_unreachable", 2.0),
    ]  # fmt: skip
    refusing = FakeClient(spec, task=[AWAY, ServiceError("HTTP 401", status=401)])
    with pytest.raises(EvaluatorRefusedError, match="refused the worker token"):
        checked_spec(cast(CompetitionClient, refusing), "c", "hk", follow=True)
    with pytest.raises(ServiceError, match="cannot reach"):
        checked_spec(cast(CompetitionClient, FakeClient(spec, competition=[AWAY])), "c", "hk",
                     follow=False)  # fmt: skip
