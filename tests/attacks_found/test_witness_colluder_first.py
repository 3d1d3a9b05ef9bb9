"""With fewer required witnesses than listed (as the docs advise), a colluding listed
witness that agrees at once settles a tape before the honest witness's disagreement
arrives; the honest word then changes nothing.

docs/threats.md, Tape witnesses: "agreement alone never outweighs a disagreement: one
honest counted witness contests the tape, whatever the number of agreeing ones";
docs/mechanism.md: "one honest witness outweighs any number of colluding ones";
docs/operator.md: "require fewer than you list (say 2 of 3), so that one silent witness
does not hold rounds". The rule only weighs the attestations present when the dispute
window closes (2 beacon rounds by default, 6 s on quicknet), and a witness recomputes
the whole merge (fetch every update, screen, aggregate, outer step) before it can
answer, so the colluder who skips the recomputation always answers first. Real service,
real signed envelopes, HYPERTRAIN_WITNESS_HOTKEYS = {honest, colluder},
HYPERTRAIN_TAPE_WITNESSES = 1.

Safe outcome: a tape one honest listed witness disagrees with is never paid (the round
waits a bounded time for every listed witness before it settles on agreement).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.challenge.dispute_scenario import (
    DIFF,
    RUN,
    SECOND,
    WITNESS,
    Service,
    addresses,
    attest,
    merged,
    witnessed_run,
)

HONEST, COLLUDER = WITNESS, SECOND


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """One witness required of the two listed; the service's own witness wait."""
    with witnessed_run(tmp_path, 1, wait=None, witness_hotkeys=addresses(HONEST, COLLUDER)) as svc:
        yield svc


def test_an_honest_listed_witnesss_disagreement_is_not_outrun_by_a_colluder(
    service: Service,
) -> None:
    tape = merged(service)  # the tape the honest witness will find forged
    assert attest(service, COLLUDER, tape).status_code == 200  # at once, no recomputation
    service.tick(3)  # the dispute window closes while the honest witness recomputes
    answer = attest(service, HONEST, tape, DIFF)
    assert answer.status_code in (200, 409), answer.text  # recorded, or refused: too late
    service.tick(1)
    assert (RUN, 0) not in service.ledger.settled, service.ledger.settled
