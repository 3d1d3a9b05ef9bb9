"""One key, one role in a run: auditors sign verdicts, the aggregator signs merge tapes.

An auditor that could also post the round's tape would choose, ahead of the real
aggregator, who is paid and the next start model (an outsider's finding,
``tests/attacks_found/test_forged_merge_tape.py``). The service refuses a tape from a key
that signed a verdict in the run and a verdict from a key that signed a tape, and, where
the operator names the aggregator keys, a tape from any other key.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hypertrain.protocol.identity import Hotkey
from tests.challenge import test_disputes as _disputes
from tests.challenge.helpers import AGGREGATOR, bearer, signed
from tests.challenge.test_disputes import AUDITOR, ISLANDS, RUN, Service
from tests.challenge.test_outsider_1 import _commit_round_0

service = _disputes.service
OTHER = Hotkey.from_seed(b"\x5b" * 32)


def _tape() -> dict[str, object]:
    return {
        "round": 0,
        "start_model_sha256": "aa" * 32,
        "new_model_sha256": "bb" * 32,
        "new_model_url": "http://relay/blobs/" + "bb" * 32,
        "outer_state_sha256": "cc" * 32,
        "tape_sha256": "dd" * 32,
        "included": sorted(k.ss58_address for k in ISLANDS),
        "excluded": {},
    }


def _judge_all(svc: Service, auditor: Hotkey) -> list[dict[str, object]]:
    """Commit round 0 and post a ``match`` for every assignment; returns the bodies."""
    _commit_round_0(svc)
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    bodies = []
    for a in assigned:
        body = {**a["body"], "result": "match"}
        body.pop("selection_beacon_round")
        r = svc.client.post(
            "/worker/v1/verdict",
            headers=bearer("worker"),
            json=signed(auditor, "verdict", body, RUN),
        )
        assert r.status_code == 200, r.text
        bodies.append(body)
    return bodies


def _post_tape(svc: Service, key: Hotkey) -> tuple[int, str]:
    r = svc.client.post(
        "/worker/v1/merge", headers=bearer("worker"), json=signed(key, "merge-tape", _tape(), RUN)
    )
    return r.status_code, r.json().get("error", "")


def test_a_key_that_signed_verdicts_cannot_sign_the_runs_tape(service: Service) -> None:
    _judge_all(service, AUDITOR)
    service.tick(20)  # past the audit window (no auditors listed: it never closes early)
    assert _post_tape(service, AUDITOR) == (403, "role_conflict")
    assert _post_tape(service, AGGREGATOR)[0] == 200  # the aggregator's tape is still taken


def test_a_key_that_signed_a_tape_cannot_sign_verdicts(service: Service) -> None:
    _judge_all(service, AUDITOR)
    service.tick(20)  # past the audit window (no auditors listed: it never closes early)
    assert _post_tape(service, AGGREGATOR)[0] == 200
    body = {"round": 0, "hotkey": ISLANDS[0].ss58_address, "result": "match", "segments": [0]}
    r = service.client.post(
        "/worker/v1/verdict",
        headers=bearer("worker"),
        json=signed(AGGREGATOR, "verdict", body, RUN),
    )
    assert (r.status_code, r.json()["error"]) == (403, "role_conflict"), r.text


@pytest.fixture
def named(tmp_path: Path) -> Iterator[Service]:
    """A service whose operator names the aggregator key (HYPERTRAIN_AGGREGATOR_HOTKEYS)."""
    yield from _disputes._service(
        tmp_path, bond=0, aggregator_hotkeys=frozenset({AGGREGATOR.ss58_address})
    )


def test_only_the_named_aggregator_keys_sign_tapes(named: Service) -> None:
    bodies = _judge_all(named, AUDITOR)
    named.tick(20)  # past the audit window (no auditors listed: it never closes early)
    assert _post_tape(named, OTHER) == (403, "role_conflict")  # a fresh worker key
    body = {**bodies[0], "round": 0}
    r = named.client.post(
        "/worker/v1/verdict",
        headers=bearer("worker"),
        json=signed(AGGREGATOR, "verdict", body, RUN),
    )
    assert (r.status_code, r.json()["error"]) == (403, "role_conflict"), r.text
    assert _post_tape(named, AGGREGATOR)[0] == 200


@pytest.fixture
def with_evaluators(tmp_path: Path) -> Iterator[Service]:
    """A service whose operator names the competition's evaluators (no aggregator named)."""
    yield from _disputes._service(
        tmp_path, bond=0, evaluator_hotkeys=frozenset({OTHER.ss58_address})
    )


def test_a_named_evaluator_signs_no_tape_and_no_verdict_of_the_training_run(
    with_evaluators: Service,
) -> None:
    bodies = _judge_all(with_evaluators, AUDITOR)
    with_evaluators.tick(20)  # past the audit window
    assert _post_tape(with_evaluators, OTHER) == (403, "role_conflict")
    r = with_evaluators.client.post(
        "/worker/v1/verdict",
        headers=bearer("worker"),
        json=signed(OTHER, "verdict", {**bodies[0], "round": 0}, RUN),
    )
    assert (r.status_code, r.json()["error"]) == (403, "role_conflict"), r.text
    assert _post_tape(with_evaluators, AGGREGATOR)[0] == 200  # the aggregator's still is
