"""A key that attested a tape of the run is admitted as an island of the same run.

docs/mechanism.md, "Tape witnesses": a witness is "a key of its own role (...) no island
of it"; docs/operator.md: the witness key must "hold no other role in the run" and
"such a key may not sign verdicts or tapes later"; CHANGELOG: "One key, one role per
run". The service refuses an island's key as a witness (and a leaver's), and refuses a
witness's later verdict or tape, but takes the reverse path: the witness joins the run
and is admitted, its attestations still counted. Real service, real signed envelopes.

Safe outcome: the join is refused (403 ``role_conflict``), as a verdict or a tape by the
same key would be.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.challenge.dispute_scenario import WITNESS, Service, attest, merged, witnessed_run
from tests.challenge.helpers import join_body


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    with witnessed_run(tmp_path, 1) as svc:
        yield svc


def test_a_key_that_attested_cannot_join_the_run_as_an_island(service: Service) -> None:
    tape = merged(service)
    assert attest(service, WITNESS, tape).status_code == 200
    answer = service.post("/v1/join", WITNESS, "join", join_body())
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"] == "role_conflict"
