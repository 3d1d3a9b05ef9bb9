"""``CompetitionClient``: the spec is verified against the coordinator it names before it is
returned, no open cycle is ``None``, and an answer outside its model is a typed refusal."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hypertrain.api.competition import CompetitionClient
from hypertrain.api.errors import ServiceError
from hypertrain.competition.messages import SPEC_DOMAIN
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from tests.challenge.helpers import TOKENS
from tests.competition.world import CID, EVALUATOR, World, spec_doc, world

__all__ = ["world"]  # the fixture, by name
URL = "http://testserver"


def _answering(doc: Any) -> CompetitionClient:
    """A client whose every request gets ``doc`` (HTTP 200)."""
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=doc))
    return CompetitionClient(URL, transport=transport)


def _spec_envelope(signer: Hotkey, coordinator: str) -> dict[str, Any]:
    body = {"spec": spec_doc(coordinator=coordinator)}
    return seal(signer, domain=SPEC_DOMAIN, run_id=CID, body=body, expiry_round=10**9).model_dump()


def test_the_signed_spec_verifies(world: World) -> None:
    client = CompetitionClient("", http=world.client)  # type: ignore[arg-type]
    spec = client.competition(CID)
    assert spec.competition_id == CID and spec.coordinator


def test_a_spec_that_does_not_verify_is_refused() -> None:
    coordinator, other = Hotkey.from_seed(b"\x02" * 32), Hotkey.from_seed(b"\x03" * 32)
    good = _spec_envelope(coordinator, coordinator.ss58_address)
    assert _answering(good).competition(CID).coordinator == coordinator.ss58_address
    with pytest.raises(ServiceError, match="does not verify"):
        _answering(good).competition("comp-2")  # another competition's spec
    with pytest.raises(ServiceError, match="does not verify"):
        _answering({**good, "signature": "00" * 64}).competition(CID)
    with pytest.raises(ServiceError, match="does not verify"):
        _answering({**good, "body": {"spec": {"competition_id": CID}}}).competition(CID)
    foreign = _spec_envelope(other, coordinator.ss58_address)
    with pytest.raises(ServiceError, match="not signed by the coordinator it names"):
        _answering(foreign).competition(CID)


def test_no_open_cycle_is_none_and_an_unknown_competition_a_refusal(world: World) -> None:
    worker = CompetitionClient("", http=world.client, worker_token=TOKENS["worker"])  # type: ignore[arg-type]
    assert worker.task(CID, EVALUATOR.ss58_address) is None  # created: no cycle due yet
    with pytest.raises(ServiceError) as refused:
        worker.task("nope", EVALUATOR.ss58_address)
    assert refused.value.status == 404


def test_an_answer_outside_its_model_is_refused() -> None:
    with pytest.raises(ServiceError, match="unexpected answer"):
        _answering({"competition_id": CID, "surprise": 1}).leaderboard(CID)
