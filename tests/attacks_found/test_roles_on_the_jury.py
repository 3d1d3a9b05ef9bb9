"""Keys listed as worker keys for another role sit on every training jury, never re-audit.

docs/competition.md (production, step 2): "Name the evaluators: ``competition init
--evaluator SS58`` ... without it, start the service with ``HYPERTRAIN_WORKER_HOTKEYS`` set
to them", one service serving the run and the competition (docs/operator.md, the
competition recipe "beside the operator's network"). docs/mechanism.md (Disputes): the jury
of a ``recompute`` dispute is "the keys listed in ``HYPERTRAIN_WORKER_HOTKEYS``, less the
verdict's auditor, the island, the aggregator keys ..." and a quorum is a strict majority
of it; the table: with three listed auditors the jury is the other two, quorum 2.

The same holds for referees: "the referee posts [its re-audit] through the verdict route,
so it must hold the worker token and, when the list is set, be listed", while the referee
process only rules on contested operations (docs/mechanism.md, Referees).

An evaluator never audits a training round, nor does a referee re-audit, yet each is a
juror: three auditors plus two such keys make a jury of four, quorum 3, which the two
honest auditors cannot reach. A
lying auditor's ``unverifiable`` on an honest island therefore stands although both other
auditors re-audit ``match``: the honest island is faulted and burned, the liar risks
nothing (an overturned ``unverifiable`` bars nobody). Played on the real service.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    RULES,
    THIRD_AUDITOR,
    Service,
    commit_round_0,
    judge,
    jury_run,
    post_tape,
    tape,
)
from tests.challenge.disputeplay import open_body
from tests.challenge.helpers import AGGREGATOR

LIAR, HONEST_B, HONEST_C = AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR
EVALUATORS = (Hotkey.from_seed(b"\x61" * 32), Hotkey.from_seed(b"\x62" * 32))


@pytest.fixture(params=["evaluators", "referees", "aggregator"])
def shared_service(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Service]:
    """Three auditors and keys of another role in the worker list: the competition's two
    evaluators, or the run's two referees, or (with ``HYPERTRAIN_AGGREGATOR_HOTKEYS``
    unset, a service that then takes no tape) the aggregator's key, unnamed, which signs
    nothing (one auditor less then: auditors A, B plus the aggregator)."""
    if request.param == "aggregator":
        with jury_run(
            tmp_path, {**RULES, "referees": []}, (LIAR, HONEST_B), name_aggregator=False
        ) as svc:
            yield svc
        return
    workers = (LIAR, HONEST_B, HONEST_C, *EVALUATORS)
    referees = [k.ss58_address for k in EVALUATORS] if request.param == "referees" else []
    with jury_run(tmp_path, {**RULES, "referees": referees}, workers) as svc:
        yield svc


def test_both_honest_auditors_overturn_a_lie_whatever_other_keys_are_listed(
    shared_service: Service,
) -> None:
    """Proves the two other auditors' agreeing re-audits overturn a false verdict whatever
    other (non-auditing) worker keys the service lists."""
    svc = shared_service
    island = ISLANDS[0]
    commit_round_0(svc)
    verdict_id, segments = judge(svc, LIAR, island, "unverifiable")
    opened = svc.post("/v1/disputes", island, "dispute-open", open_body(verdict_id, segments[-1]))
    assert opened.status_code == 200, opened.text
    listed = svc.settings.worker_hotkeys
    for juror in (HONEST_B, HONEST_C):
        if juror.ss58_address in listed:
            judge(svc, juror, island, "match")
    svc.tick(60)  # past the bound: nobody else re-audits (they score models, or rule)
    game = svc.client.get(f"/v1/disputes/{opened.json()['dispute_id']}").json()["game"]
    assert game["outcome"] == "overturned", (
        f"every other auditor re-audited 'match', the lie is {game['outcome']}: the"
        " keys of another role listed as worker keys sat on the jury"
    )


@pytest.fixture
def unnamed_aggregator(tmp_path: Path) -> Iterator[Service]:
    """Three auditors and two evaluators listed; ``HYPERTRAIN_AGGREGATOR_HOTKEYS`` unset
    (its default: a service that names no aggregator)."""
    workers = (LIAR, HONEST_B, HONEST_C, *EVALUATORS)
    with jury_run(tmp_path, {**RULES, "referees": []}, workers, name_aggregator=False) as svc:
        yield svc


def _evaluator_tape(svc: Service) -> tuple[int, str]:
    """Round 0 in its merge phase; the first evaluator's tape, answered."""
    commit_round_0(svc)
    svc.tick(30)  # the audit window is over: the round is in its merge phase
    return _tape(svc, EVALUATORS[0])


def _tape(svc: Service, key: Hotkey) -> tuple[int, str]:
    # the new model is the evaluator's choice of the next start model
    r = post_tape(svc, tape(0, new_model_sha256="ee" * 32, included=[], excluded={}), key)
    return r.status_code, r.json().get("error", r.text)


def test_an_evaluator_key_cannot_sign_the_training_runs_merge_tape(
    unnamed_aggregator: Service,
) -> None:
    """Proves a key listed only to score the competition cannot merge the training run:
    first in the merge phase, its tape (nobody paid, a model of its choosing) would shut
    out the aggregator's. With no aggregator key named, no key is one: the service takes
    no tape at all, and says why."""
    status, error = _evaluator_tape(unnamed_aggregator)
    assert (status, error) == (403, "no_aggregator_named"), (
        f"an evaluator key signed the training run's merge tape: {status} {error}"
    )


@pytest.fixture
def named_aggregator(tmp_path: Path) -> Iterator[Service]:
    """The same service with the aggregator named in ``HYPERTRAIN_AGGREGATOR_HOTKEYS``."""
    workers = (LIAR, HONEST_B, HONEST_C, *EVALUATORS)
    with jury_run(tmp_path, {**RULES, "referees": []}, workers) as svc:
        yield svc


def test_a_listed_key_not_named_an_aggregator_cannot_sign_the_merge_tape(
    named_aggregator: Service,
) -> None:
    """Proves that where the aggregator is named, a worker-listed key that is not (the
    evaluator listed by mistake) is refused as a role conflict, and the round still merges
    on the aggregator's tape."""
    assert _evaluator_tape(named_aggregator) == (403, "role_conflict")
    assert _tape(named_aggregator, AGGREGATOR)[0] == 200
