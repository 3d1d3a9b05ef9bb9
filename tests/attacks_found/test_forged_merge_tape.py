"""Any worker key posts the round's merge tape first: it picks who is paid and the next model.

docs/aggregator.md: "The aggregator ... is not trusted: everything it does is written down in
a merge tape that anyone can replay from public blobs (``verify-tape``)"; docs/threats.md
(Merge): "The aggregator itself is not trusted: ``verify-tape`` recomputes every decision";
docs/operator.md: auditors and the aggregator share the worker token and are all listed in
``HYPERTRAIN_WORKER_HOTKEYS``, which lets them "sign verdicts and merge tapes".

So an auditor key (or the aggregator itself) posts a tape for the round as soon as it enters
``merge``: the honest, audit-proven island is marked ``near_duplicate`` (unpaid, no burn,
nothing the service checks), its colluding island is the only one included, and the new model
hash is bytes of its choosing. The service records it, settles the round from it (the
colluder takes the whole pool), and refuses the real aggregator's tape. ``verify-tape`` would
print ``DIFFERENT``, but nothing waits for it or can undo a settled round.

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
    RUN,
    Service,
    addresses,
    commit_round_0,
    dispute_run,
    post_tape,
    post_verdict,
    tape,
)

FORGER = AUDITOR  # a listed worker key: an auditor
AGGREGATOR = Hotkey.from_seed(b"\x58" * 32)
LIAR = Hotkey.from_seed(b"\x59" * 32)  # a dishonest aggregator: it never signs verdicts


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    """Both aggregator keys named (``HYPERTRAIN_AGGREGATOR_HOTKEYS``): the honest one and
    the liar, whose tapes the service takes as it takes any named aggregator's."""
    with dispute_run(tmp_path, aggregator_hotkeys=addresses(AGGREGATOR, LIAR)) as svc:
        yield svc


def _tape(included: list[str], excluded: dict[str, str], new_model: str) -> dict[str, Any]:
    url = "http://relay/blobs/" + new_model
    return tape(
        0, new_model_sha256=new_model, new_model_url=url, included=included, excluded=excluded
    )


def test_a_tape_that_unpays_an_audit_proven_island_is_not_settled_unchecked(
    service: Service,
) -> None:
    honest, colluder = ISLANDS
    commit_round_0(service)
    for island in ISLANDS:  # both islands audited and proven (match, update re-encoded)
        r = post_verdict(service, FORGER, island, "match", update_checked=True)
        assert r.status_code == 200, r.text
    service.tick(20)  # every island judged and the audit window over: merge phase
    forged = _tape([colluder.ss58_address], {honest.ss58_address: "near_duplicate"}, "ee" * 32)
    posted = post_tape(service, forged, FORGER)
    real = _tape(sorted(k.ss58_address for k in ISLANDS), {}, "bb" * 32)
    answer = post_tape(service, real, AGGREGATOR)
    service.tick(30)
    paid = service.ledger.settled.get((RUN, 0), {})
    start = service.client.get(f"/v1/runs/{RUN}/rounds/0").json()
    assert honest.ss58_address in paid, (
        f"a tape from an auditor key was accepted ({posted.status_code}), the real aggregator's"
        f" refused ({answer.status_code} {answer.json().get('error')}), and round 0 settled"
        f" paying {paid} with new model {start.get('new_model_sha256', '?')[:8]}: the"
        " audit-proven honest island was left unpaid on the forger's word"
    )


def test_a_tape_cannot_burn_an_audit_proven_island_by_calling_its_blob_missing(
    service: Service,
) -> None:
    """docs/mechanism.md (Settlement from proof): an island excluded for "something only the
    island controls: ``missing_blob`` ..." is faulted, and ``record_fault`` "burns all its
    unpaid value in the run". The service took the reason from the tape's word: a tape that
    called the audit-proven island's uploaded update ``missing_blob`` burned it. Here the
    tape comes from a dishonest aggregator key (one that signs no verdict, so the role
    rule lets it post): its word may leave the island unpaid for the round, never burn."""
    honest, other = ISLANDS
    commit_round_0(service)
    for island in ISLANDS:  # both proven by their audits: the update re-encoded and matched
        r = post_verdict(service, FORGER, island, "match", update_checked=True)
        assert r.status_code == 200, r.text
    service.tick(20)  # the audit window is over (one auditor never closes it early): merge
    forged = _tape([other.ss58_address], {honest.ss58_address: "missing_blob"}, "bb" * 32)
    posted = post_tape(service, forged, LIAR)
    assert posted.status_code == 200, posted.text
    service.tick(30)
    assert (RUN, 0, honest.ss58_address) not in service.ledger.faults, (
        "a tape's word 'missing_blob' faulted (burned) an island whose update an auditor had"
        f" just re-encoded and matched: faults {service.ledger.faults}"
    )
