"""One colluding auditor bars every honest auditor of a run, then nobody can contest it.

docs/mechanism.md (Disputes): a ``recompute`` dispute (start, update or unverifiable check)
"sets the verdict aside and lists its assignment at ``GET /v1/runs/{run}/reassigned``: another
auditor (never the verdict's) re-audits it from the public records, and its verdict decides
(``match``: overturned, and the verdict's auditor is barred)". docs/threats.md (Auditor): an
honest auditor is barred "only when that re-audit agrees with the island".

"Another auditor" is whichever worker key answers first, and its word alone decides. A
listed auditor B that colludes with a cheating island X: X uploads an update that is not the
encoding of its final state (or fakes leaf 0); the honest auditor A rightly signs
``mismatch`` (``check: update``); X disputes (a ``recompute``, no game); B posts ``match`` at
once. A is barred for the run, its other verdicts in non-final rounds are set aside, X is
overturned, and a third, honest auditor C's ``mismatch`` of the same assignment, arriving
later, changes nothing. Repeated once per honest auditor key, B becomes the only auditor
left: its lies can no longer be re-audited by anyone, and its cheaters are never caught.

The network here is the real challenge service (HTTP routes, signed envelopes).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREE,
    RULES,
    THIRD_AUDITOR,
    Service,
    barred,
    post_verdict,
    rules_run,
    verdict_of_check,
)
from tests.challenge.disputeplay import open_body

HONEST_A = AUDITOR
COLLUDER_B = OTHER_AUDITOR
HONEST_C = THIRD_AUDITOR


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Service]:
    with rules_run(tmp_path, {**RULES, "referees": [REFEREE.ss58_address]}) as svc:
        yield svc


def _reaudit(svc: Service, auditor: Hotkey, result: str, **fields: Any) -> Any:
    return post_verdict(svc, auditor, ISLANDS[0], result, update_checked=True, **fields)


def test_one_colluding_auditor_cannot_bar_an_honest_auditor_on_its_word_alone(
    net: Service,
) -> None:
    """Proves a recompute dispute is not decided by the first re-audit: one colluding
    auditor's ``match`` against a third auditor's ``mismatch`` bars nobody."""
    cheater = ISLANDS[0]
    verdict_id, segments = verdict_of_check(net, "update")  # A's true catch: the update is wrong
    opened = net.post("/v1/disputes", cheater, "dispute-open", open_body(verdict_id, segments[-1]))
    assert opened.status_code == 200, opened.text
    assert opened.json()["game"]["stage"] == "recompute"
    lie = _reaudit(net, COLLUDER_B, "match")  # the colluder answers first
    assert lie.status_code == 200, lie.text
    truth = _reaudit(net, HONEST_C, "mismatch", first_bad_leaf=4, check="update")
    faulty = barred(net)
    outcome = net.client.get(f"/v1/disputes/{opened.json()['dispute_id']}").json()["game"]
    assert HONEST_A.ss58_address not in faulty, (
        "one other auditor's unproven 'match' barred the honest auditor whose update check"
        f" caught the cheater (dispute {outcome['outcome']}); a third auditor's mismatch"
        f" ({truth.status_code}) changed nothing: barred {faulty}"
    )
