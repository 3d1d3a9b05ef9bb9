"""``CompetitionClient``: the competition-mode routes, on top of :class:`ChallengeClient`.

Responses are parsed into the same models the service answers with
(:mod:`hypertrain.competition.messages`); the signed spec is verified against the
coordinator it names before it is returned.
"""

from __future__ import annotations

from typing import Any, Self, TypeVar

from pydantic import BaseModel, JsonValue, ValidationError

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.competition.messages import (
    SPEC_DOMAIN,
    CommitAccepted,
    CompetitionCreated,
    CycleRecord,
    CycleTask,
    Leaderboard,
    RevealAccepted,
    ScoreAccepted,
)
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.protocol.envelope import Envelope, open_envelope
from hypertrain.protocol.errors import EnvelopeError

ModelT = TypeVar("ModelT", bound=BaseModel)


class CompetitionClient(ChallengeClient):
    """Miners commit and reveal; evaluators fetch tasks and post scores; anyone reads."""

    def __enter__(self) -> Self:
        return self

    def create_competition(self, spec: dict[str, JsonValue], pool: str) -> CompetitionCreated:
        """Create a competition; ``pool`` is :func:`~hypertrain.competition.pool.encode_pool`."""
        body = {"spec": spec, "pool": pool}
        doc = self._call("POST", "/admin/v1/competitions", body, role="admin")
        return _parse(CompetitionCreated, doc)

    def competition(self, competition_id: str) -> CompetitionSpec:
        """The spec, verified: signed for this competition by the coordinator it names."""
        raw = self._call("GET", f"/v1/competitions/{competition_id}")
        try:
            env = open_envelope(raw, domain=SPEC_DOMAIN, run_id=competition_id)
            spec = CompetitionSpec.model_validate(env.body["spec"])
        except (EnvelopeError, ValidationError, KeyError, TypeError) as exc:
            raise ServiceError(f"the spec of {competition_id} does not verify: {exc}") from None
        if spec.coordinator != env.signer:
            raise ServiceError("the spec is not signed by the coordinator it names")
        return spec

    def cycle_record(self, competition_id: str, cycle: int) -> CycleRecord:
        doc = self._call("GET", f"/v1/competitions/{competition_id}/cycles/{cycle}")
        return _parse(CycleRecord, doc)

    def leaderboard(self, competition_id: str) -> Leaderboard:
        doc = self._call("GET", f"/v1/competitions/{competition_id}/leaderboard")
        return _parse(Leaderboard, doc)

    def compete_commit(self, envelope: Envelope) -> CommitAccepted:
        return self._post(CommitAccepted, "/v1/compete/commit", envelope)

    def compete_reveal(self, envelope: Envelope) -> RevealAccepted:
        return self._post(RevealAccepted, "/v1/compete/reveal", envelope)

    def task(self, competition_id: str, evaluator: str) -> CycleTask | None:
        """The open cycle, or None when the competition has none right now."""
        path = f"/worker/v1/competitions/{competition_id}/task?evaluator={evaluator}"
        try:
            doc = self._call("GET", path, role="worker")
        except ServiceError as exc:
            if exc.code == "no_open_cycle":
                return None
            raise
        return _parse(CycleTask, doc)

    def post_score(self, envelope: Envelope) -> ScoreAccepted:
        return self._post(ScoreAccepted, "/worker/v1/compete/score", envelope, role="worker")


def _parse(model: type[ModelT], doc: Any) -> ModelT:
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise ServiceError(f"unexpected answer from the service: {exc}") from None
