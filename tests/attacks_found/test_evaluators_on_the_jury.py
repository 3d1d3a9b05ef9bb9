"""Evaluator keys listed as worker keys sit on every training jury and never re-audit.

docs/competition.md (production, step 2): "Name the evaluators: ``competition init
--evaluator SS58`` ... without it, start the service with ``HYPERTRAIN_WORKER_HOTKEYS`` set
to them", one service serving the run and the competition (docs/operator.md, the
competition recipe "beside the operator's network"). docs/mechanism.md (Disputes): the jury
of a ``recompute`` dispute is "the keys listed in ``HYPERTRAIN_WORKER_HOTKEYS``, less the
verdict's auditor, the island, the aggregator keys ..." and a quorum is a strict majority
of it; the table: with three listed auditors the jury is the other two, quorum 2.

An evaluator never audits a training round, yet it is a juror: three auditors plus two
evaluators make a jury of four, quorum 3, which the two honest auditors cannot reach. A
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
)
from tests.challenge.disputeplay import open_body

LIAR, HONEST_B, HONEST_C = AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR
EVALUATORS = (Hotkey.from_seed(b"\x61" * 32), Hotkey.from_seed(b"\x62" * 32))


@pytest.fixture
def shared_service(tmp_path: Path) -> Iterator[Service]:
    """Three auditors and the competition's two evaluators in the worker list."""
    workers = (LIAR, HONEST_B, HONEST_C, *EVALUATORS)
    with jury_run(tmp_path, {**RULES, "referees": []}, workers) as svc:
        yield svc


def test_both_honest_auditors_overturn_a_lie_when_evaluators_are_listed(
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
    for juror in (HONEST_B, HONEST_C):
        judge(svc, juror, island, "match")
    svc.tick(60)  # past the bound: nobody else re-audits (evaluators score models)
    game = svc.client.get(f"/v1/disputes/{opened.json()['dispute_id']}").json()["game"]
    assert game["outcome"] == "overturned", (
        f"both other auditors re-audited 'match', the lie is {game['outcome']}: the"
        " evaluators listed as worker keys sat on the jury"
    )
