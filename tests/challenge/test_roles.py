"""One key, one role in a run: auditors sign verdicts, the aggregator signs merge tapes.

An auditor that could also post the round's tape would choose, ahead of the real
aggregator, who is paid and the next start model (an outsider's finding,
``tests/attacks_found/test_forged_merge_tape.py``). The service refuses a tape from a key
that signed a verdict in the run and a verdict from a key that signed a tape, and a tape
from any key the operator did not name in ``HYPERTRAIN_AGGREGATOR_HOTKEYS``.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from hypertrain.challenge.facts import roles
from hypertrain.dispute import opinputs
from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    REFEREE,
    RUN,
    Service,
    addresses,
    commit_round_0,
    dispute_run,
    played_to_referee,
    post_tape,
    running,
    send_verdict,
    service,
    tape,
    to_verdict,
)
from tests.challenge.disputeplay import TENSORS, open_body
from tests.challenge.helpers import AGGREGATOR, bearer, join_body, signed, write_metagraph

__all__ = ["service"]  # the fixture, by name
OTHER = Hotkey.from_seed(b"\x5b" * 32)


def _tape() -> dict[str, object]:
    url = "http://relay/blobs/" + "bb" * 32
    return tape(0, new_model_url=url, included=sorted(k.ss58_address for k in ISLANDS), excluded={})


def _judge_all(svc: Service, auditor: Hotkey) -> list[dict[str, object]]:
    """Commit round 0 and post a ``match`` for every assignment; returns the bodies."""
    commit_round_0(svc)
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/0/assignments", headers=bearer("worker")
    ).json()
    bodies = []
    for a in assigned:
        body = {**a["body"], "result": "match"}
        body.pop("selection_beacon_round")
        r = send_verdict(svc, auditor, body)
        assert r.status_code == 200, r.text
        bodies.append(body)
    return bodies


def _post_tape(svc: Service, key: Hotkey) -> tuple[int, str]:
    r = post_tape(svc, _tape(), key)
    return r.status_code, r.json().get("error", "")


def test_a_key_that_signed_verdicts_cannot_sign_the_runs_tape(service: Service) -> None:
    """Also once the operator names it an aggregator key after it judged (a restart)."""
    _judge_all(service, AUDITOR)
    service.tick(20)  # past the audit window (no auditors listed: it never closes early)
    assert _post_tape(service, AUDITOR) == (403, "role_conflict")  # not named
    service.client.__exit__(None, None, None)
    named = service.settings.aggregator_hotkeys | {AUDITOR.ss58_address}
    service.settings = dataclasses.replace(service.settings, aggregator_hotkeys=named)
    with running(service):
        r = post_tape(service, _tape(), AUDITOR)
        assert (r.status_code, r.json()["error"]) == (403, "role_conflict"), r.text
        assert "signed verdicts" in r.json()["detail"]
        assert _post_tape(service, AGGREGATOR)[0] == 200  # the aggregator's is still taken


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
    with dispute_run(tmp_path, aggregator_hotkeys=addresses(AGGREGATOR)) as svc:
        yield svc


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
    with dispute_run(tmp_path, evaluator_hotkeys=addresses(OTHER)) as svc:
        yield svc


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


# Keys named for one role act in no other (docs/threats.md, "Roles"): each of these was
# accepted before the role table in ``claims`` (a test written first, then the fix).

WITNESS = Hotkey.from_seed(b"\x71" * 32)


def _named(tmp_path: Path, *aggregators: Hotkey) -> Iterator[Service]:
    """The run's referee and a listed witness registered; ``aggregators`` named."""
    registered = [k.ss58_address for k in (*ISLANDS, REFEREE, WITNESS)]
    metagraph = write_metagraph(tmp_path / "keys.json", registered)
    with dispute_run(
        tmp_path,
        metagraph_file=metagraph,
        aggregator_hotkeys=addresses(*aggregators),
        witness_hotkeys=addresses(WITNESS),
    ) as svc:
        yield svc


@pytest.fixture
def refereed(tmp_path: Path) -> Iterator[Service]:
    """A referee (the manifest's) and a listed witness, each named for its role only."""
    yield from _named(tmp_path, AGGREGATOR)


@pytest.fixture
def referee_named_twice(tmp_path: Path) -> Iterator[Service]:
    """The run's referee is named as an aggregator key too."""
    yield from _named(tmp_path, AGGREGATOR, REFEREE)


def _join(svc: Service, key: Hotkey) -> tuple[int, str]:
    r = svc.post("/v1/join", key, "join", join_body())
    return r.status_code, r.json().get("error", "")


def test_a_referee_or_a_named_witness_of_the_run_never_joins_it_as_an_island(
    refereed: Service,
) -> None:
    """Proves a referee cannot train in the run whose disputes it rules (an island that
    rules its competitors' audits decides who is burned), nor a listed witness vouch
    for a tape that pays it."""
    svc = refereed
    assert _join(svc, REFEREE) == (403, "role_conflict")
    assert _join(svc, WITNESS) == (403, "role_conflict")
    assert _join(svc, ISLANDS[0])[0] == 200


def test_a_named_witness_signs_no_verdict_and_no_tape(refereed: Service) -> None:
    """Proves a key listed in ``HYPERTRAIN_WITNESS_HOTKEYS`` does not audit the run before
    it attests (the worker list is unset: any worker-token holder audits)."""
    svc = refereed
    bodies = _judge_all(svc, AUDITOR)
    r = svc.client.post(
        "/worker/v1/verdict",
        headers=bearer("worker"),
        json=signed(WITNESS, "verdict", {**bodies[0], "round": 0}, RUN),
    )
    assert (r.status_code, r.json()["error"]) == (403, "role_conflict"), r.text
    svc.tick(20)  # past the audit window
    assert _post_tape(svc, WITNESS) == (403, "role_conflict")


def test_a_referee_named_as_an_aggregator_key_neither_rules_nor_signs_tapes(
    referee_named_twice: Service,
) -> None:
    """Proves the key that may merge the run does not also rule its disputes: the
    referee's ruling and its tape are refused while it holds both names."""
    svc = referee_named_twice
    verdict_id, segment = to_verdict(svc)
    opened = svc.post("/v1/disputes", ISLANDS[0], "dispute-open", open_body(verdict_id, segment))
    dispute_id = opened.json()["dispute_id"]
    game = played_to_referee(svc, dispute_id)
    r = svc.client.put(f"/v1/disputes/{dispute_id}/inputs", content=opinputs.encode(TENSORS))
    assert r.status_code == 200, r.text
    ruling = {
        "dispute_id": dispute_id,
        "query": r.json()["game"]["query"],
        "inputs_sha256": hashlib.sha256(opinputs.encode(TENSORS)).hexdigest(),
        "outputs": game["outputs"]["auditor"],
    }
    refused = svc.post(f"/v1/disputes/{dispute_id}/ruling", REFEREE, "dispute-ruling", ruling)
    assert (refused.status_code, refused.json()["error"]) == (403, "role_conflict"), refused.text
    assert svc.client.get(f"/v1/disputes/{dispute_id}").json()["game"]["stage"] == "referee"
    svc.tick(20)  # past the audit window
    assert _post_tape(svc, REFEREE) == (403, "role_conflict")


# the role each act confers (a tape: both the named role and the acted one)
CONFERS: dict[roles.Act, tuple[roles.Held, ...]] = {
    "verdict": ("auditor",),
    "merge-tape": ("aggregator", "tape signer"),
    "witness": ("witness",),
    "island": ("island",),
    "ruling": ("referee",),
}


def test_the_role_table_bars_both_ways() -> None:
    """Proves no pair of roles conflicts one way only: where holding role B bars act A,
    holding the role A confers bars B's act, so the order two keys act in never matters."""
    for act, barred in roles.BARRED.items():
        for other, conferred in CONFERS.items():
            if other == act:
                continue
            one_way = any(held in barred for held in conferred)
            other_way = any(held in roles.BARRED[other] for held in CONFERS[act])
            assert one_way == other_way, (act, other)
        assert not set(CONFERS[act]) & barred, f"{act} is barred by the role it confers"
