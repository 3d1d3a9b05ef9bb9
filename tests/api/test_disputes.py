"""The dispute routes' answers as the client parses them (``hypertrain.api.disputes``): each
route's own model, over the real service of the dispute scenario."""

from __future__ import annotations

import hashlib

from hypertrain.api.client import ChallengeClient
from hypertrain.api.disputes import DisputeAnswered, DisputeOpened, DisputeRuled
from hypertrain.dispute import opinputs
from hypertrain.protocol.envelope import seal
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    REFEREE,
    RUN,
    Service,
    played_to_referee,
    service,
    to_verdict,
)
from tests.challenge.disputeplay import TENSORS
from tests.challenge.disputeplay import commitment as _commitment
from tests.challenge.disputeplay import open_body as _open_body

__all__ = ["service"]  # the fixture, by name


def test_client_parses_each_dispute_answer_into_its_model(service: Service) -> None:
    client = ChallengeClient("http://testserver", http=service.client)  # type: ignore[arg-type]
    verdict_id, segment = to_verdict(service)
    env = seal(
        ISLANDS[0], domain="dispute-open", run_id=RUN, body=_open_body(verdict_id, segment),
        expiry_round=5000,
    )  # fmt: skip
    opened = client.open_dispute(env)
    assert isinstance(opened, DisputeOpened) and opened.game.stage == "step"
    assert (opened.hotkey, opened.auditor) == (ISLANDS[0].ss58_address, AUDITOR.ss58_address)
    game = opened.game.model_dump(mode="json")
    body = _commitment(game, "auditor")
    answer_env = seal(AUDITOR, domain="dispute-answer", run_id=RUN, body=body, expiry_round=5000)
    answered = client.dispute_answer(opened.dispute_id, answer_env)
    assert isinstance(answered, DisputeAnswered) and "auditor" in answered.game.commitments
    game = played_to_referee(service, opened.dispute_id)
    inputs = client.put_dispute_inputs(opened.dispute_id, opinputs.encode(TENSORS))
    ruling = {
        "dispute_id": opened.dispute_id,
        "query": inputs.game.query,
        "inputs_sha256": hashlib.sha256(opinputs.encode(TENSORS)).hexdigest(),
        "outputs": game["outputs"]["island"],
    }
    ruled = client.dispute_ruling(
        opened.dispute_id,
        seal(REFEREE, domain="dispute-ruling", run_id=RUN, body=ruling, expiry_round=5000),
    )
    assert isinstance(ruled, DisputeRuled) and ruled.game.outcome == "overturned"
    # the overturned verdict waits for an independent re-audit; nothing else is set aside
    assert [a.verdict_id for a in client.reassigned(RUN)] == [verdict_id]
