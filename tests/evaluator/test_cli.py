"""``hypertrain competition evaluate``: its start, and the time it allows one model.

``--follow`` waits for a service that is away at start: a service that gives no answer or
fails (5xx) is ``service_unreachable`` and waited for (``rolekit.when_up``); a refusal (a
bad worker token: 401) still ends the command, and the one-shot command fails at once. A
``--time-limit-s`` longer than the spec's ``cycle.model_time_limit_s`` is refused.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from hypertrain.api.competition import CompetitionClient
from hypertrain.api.errors import ServiceError
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.evaluator.cli import checked_spec, time_limit_s
from hypertrain.evaluator.runner import EvaluatorRefusedError
from hypertrain.evaluator.sandbox import default_limits
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


def test_the_evaluator_scores_within_the_specs_limit() -> None:
    cycle = {"score_window_rounds": 20, "model_time_limit_s": 60}
    spec = CompetitionSpec.model_validate(spec_doc(cycle=cycle))
    assert default_limits(spec).time_s == 60
    assert time_limit_s(None, 60) == 60 and time_limit_s(30, 60) == 30
    with pytest.raises(ValueError, match=r"exceeds the spec's cycle\.model_time_limit_s"):
        time_limit_s(600, 60)
