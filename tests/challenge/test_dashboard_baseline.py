"""The operator's data-parallel baseline curve: published with the admin token, kept whole,
carried by the dashboard document with its gap, refused with a typed 4xx when malformed,
and read by nothing that feeds a hash, a verdict or a reward."""

from __future__ import annotations

from typing import Any

import pytest

from hypertrain.api.baseline import MAX_BASELINE_ROUNDS, BaselineIn
from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.challenge.dashboard.baseline import gap, planned_rounds
from hypertrain.challenge.dashboard.models import CurvePoint, Dashboard
from tests.challenge.conftest import Harness
from tests.challenge.dashdata import run_rounds
from tests.challenge.helpers import TOKENS, bearer

PATH = "/admin/v1/runs/run-1/baseline"
LABEL = "data-parallel on the same tokens"


def _put(h: Harness, body: Any, token: str = "admin", path: str = PATH) -> tuple[int, Any]:
    r = h.client.put(path, json=body, headers=bearer(token))
    return r.status_code, r.json()


def test_a_published_curve_is_carried_by_the_dashboard_with_its_gap(harness: Harness) -> None:
    run_rounds(harness, rounds=2)  # the network's held-out loss: 4.5, then 4.0
    status, answer = _put(harness, {"label": LABEL, "heldout_loss": [4.4, 3.9]})
    assert status == 200, answer
    assert answer == {
        "run_id": "run-1",
        "label": LABEL,
        "heldout_loss": [4.4, 3.9],
        "updated_beacon_round": harness.beacon.round,
    }
    doc = Dashboard.model_validate(harness.client.get("/v1/runs/run-1/dashboard").json())
    assert doc.baseline is not None and doc.baseline.label == LABEL
    assert doc.baseline.heldout_loss == [4.4, 3.9]
    g = doc.baseline.gap
    assert g is not None and (g.round, g.heldout_loss, g.baseline_loss) == (1, 4.0, 3.9)
    assert g.gap_pct == pytest.approx(100 * (4.0 / 3.9 - 1))


def test_a_second_publication_replaces_the_first(harness: Harness) -> None:
    assert _put(harness, {"heldout_loss": [4.4, 3.9]})[0] == 200
    status, answer = _put(harness, {"label": "one cluster", "heldout_loss": [5.0]})
    assert status == 200 and answer["label"] == "one cluster"
    doc = harness.client.get("/v1/runs/run-1/dashboard").json()
    assert doc["baseline"]["heldout_loss"] == [5.0] and doc["baseline"]["gap"] is None


def test_without_a_publication_the_document_says_none(harness: Harness) -> None:
    assert harness.client.get("/v1/runs/run-1/dashboard").json()["baseline"] is None


def test_the_curve_is_informational_only(harness: Harness) -> None:
    """Publishing changes no round, roster or loss the service serves."""
    run_rounds(harness, rounds=2)
    reads = ("/v1/runs/run-1/rounds", "/v1/runs/run-1/roster", "/v1/runs/run-1/loss")
    before = [harness.client.get(path).json() for path in reads]
    assert _put(harness, {"heldout_loss": [1.0, 0.5]})[0] == 200
    assert [harness.client.get(path).json() for path in reads] == before


def test_the_admin_token_is_required(harness: Harness) -> None:
    r = harness.client.put(PATH, json={"heldout_loss": [4.0]})
    assert (r.status_code, r.json()["error"]) == (401, "unauthorized")
    assert _put(harness, {"heldout_loss": [4.0]}, token="worker")[1]["error"] == "unauthorized"


def test_an_unknown_run_is_404(harness: Harness) -> None:
    status, answer = _put(harness, {"heldout_loss": [4.0]}, path="/admin/v1/runs/nope/baseline")
    assert (status, answer["error"]) == (404, "unknown_run")


def test_more_points_than_the_run_plans_is_400(harness: Harness) -> None:
    planned = planned_rounds(harness.state.manifest("run-1"))
    assert planned == 1000 // 8  # the fixture's schedule
    assert _put(harness, {"heldout_loss": [4.0] * planned})[0] == 200
    status, answer = _put(harness, {"heldout_loss": [4.0] * (planned + 1)})
    assert (status, answer["error"]) == (400, "too_many_rounds")
    kept = harness.client.get("/v1/runs/run-1/dashboard").json()["baseline"]
    assert len(kept["heldout_loss"]) == planned  # the refused one changed nothing


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"heldout_loss": []}, "heldout_loss"),  # no point
        ({"heldout_loss": [-0.5]}, "heldout_loss"),  # not a loss
        ({"heldout_loss": ["4.0x"]}, "heldout_loss"),  # not a number
        ({"heldout_loss": ["1.5"]}, "heldout_loss"),  # a number's text is not coerced
        ({"heldout_loss": [True]}, "heldout_loss"),  # nor is a boolean (an outsider's find)
        ({"heldout_loss": [4.0] * (MAX_BASELINE_ROUNDS + 1)}, "heldout_loss"),  # too long
        ({"heldout_loss": [4.0], "label": ""}, "label"),
        ({"heldout_loss": [4.0], "label": "x" * 81}, "label"),
        ({"heldout_loss": [4.0], "label": "two\nlines"}, "label"),
        ({"heldout_loss": [4.0], "weight": 1}, "weight"),  # unknown field
        ({"label": LABEL}, "heldout_loss"),  # missing
    ],
)
def test_a_malformed_body_is_a_typed_422(harness: Harness, body: Any, field: str) -> None:
    status, answer = _put(harness, body)
    assert (status, answer["error"]) == (422, "bad_request") and field in answer["detail"]


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_loss_is_a_typed_400(harness: Harness, literal: str) -> None:
    """JSON as Python reads it admits NaN and infinities; the protocol's strict parser,
    which every JSON body passes first, refuses them."""
    r = harness.client.put(
        PATH,
        content=f'{{"heldout_loss": [4.0, {literal}]}}',
        headers={**bearer("admin"), "content-type": "application/json"},
    )
    assert (r.status_code, r.json()["error"]) == (400, "non_canonical_json")
    assert "finite" in r.json()["detail"]


def test_the_client_publishes_with_the_admin_token(harness: Harness) -> None:
    url = "http://testserver"
    admin = ChallengeClient(url, admin_token=TOKENS["admin"], http=harness.client)
    answer = admin.put_baseline("run-1", BaselineIn(heldout_loss=[4.4]))
    assert answer.label == LABEL and answer.heldout_loss == [4.4]
    with pytest.raises(ServiceError, match="needs the admin token"):
        ChallengeClient(url, http=harness.client).put_baseline(
            "run-1", BaselineIn(heldout_loss=[1])
        )
    with pytest.raises(ServiceError) as refused:
        admin.put_baseline("nope", BaselineIn(heldout_loss=[4.4]))
    assert (refused.value.status, refused.value.code) == (404, "unknown_run")


def test_the_gap_is_at_the_latest_round_both_curves_have() -> None:
    curve = [CurvePoint(round=r, heldout_loss=v, train_loss_self_reported=None)
             for r, v in ((0, 5.0), (1, 4.6), (3, 4.2))]  # fmt: skip
    at = gap(curve, [4.9, 4.5, 4.4])  # no baseline figure for round 3 yet
    assert at is not None and (at.round, at.heldout_loss, at.baseline_loss) == (1, 4.6, 4.5)
    assert at.gap_pct == pytest.approx(100 * (4.6 / 4.5 - 1))
    assert gap(curve[2:], [4.9]) is None and gap([], [4.9]) is None
