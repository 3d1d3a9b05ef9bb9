"""Who ``carry_stored`` lists, on the real service (a stepped beacon, signed envelopes).

docs/protocol.md: ``carry_stored`` lists "the rostered islands whose round before has a
standing ``match`` verdict and no standing fault under ``carry``", never an island of
``fresh_start``; docs/auditor.md: the auditor stores the state "before it posts a
``match`` whose replay reached the final state". Attacks on the listing:

* a ``match`` whose own body says the final segment was not replayed (its ``segments``
  leave the final one out, ``update_checked`` false) is accepted at intake (a verdict may
  name a subset of its assignment) and lists the island, though no replay reached a
  final state to store (the finding below);
* an island with a proven fault and a later ``match`` (fresh and stored at once);
* a ``reset`` run (nothing is ever stored);
* a fault verdict next to the ``match`` (standing, or split);
* a ``match`` that lands after the next round opened (the record is fixed at the open).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import RoundOpen
from tests.challenge.dispute_scenario import (
    AUDITOR,
    OTHER_AUDITOR,
    THIRD_AUDITOR,
    Service,
    carry_doc,
    joined_run,
    open_round,
    post_tape,
    round_detail,
    tape,
)
from tests.challenge.helpers import bearer, commit_body, manifest_doc, signed

RUN = "run-carry-listing"
A, B = (Hotkey.from_seed(bytes([0xA0 + i]) * 32) for i in range(2))
ISLANDS = (A, B)
LAST = 3  # carry_doc: inner_steps 8, checkpoint_interval 2: segments 0..3


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    with joined_run(tmp_path, carry_doc(RUN), ISLANDS) as service:
        yield service


@pytest.fixture
def reset_svc(tmp_path: Path) -> Iterator[Service]:
    with joined_run(tmp_path, manifest_doc(RUN, rate=1.0, segments=1), ISLANDS) as service:
        yield service


def _assignment(svc: Service, index: int, island: Hotkey) -> dict[str, Any]:
    for a in svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/{index}/assignments", headers=bearer("worker")
    ).json():
        if a["body"]["hotkey"] == island.ss58_address:
            body: dict[str, Any] = dict(a["body"])
            body.pop("selection_beacon_round")
            return body
    raise AssertionError(f"{island.ss58_address} has no assignment in round {index}")


def _verdict(
    svc: Service, index: int, island: Hotkey, result: str, auditor: Hotkey = AUDITOR, **fields: Any
) -> Any:
    body = {**_assignment(svc, index, island), "result": result, **fields}
    if result == "unverifiable":
        body.setdefault("detail", "index withheld")
    return svc.client.post(
        "/worker/v1/verdict", headers=bearer("worker"), json=signed(auditor, "verdict", body, RUN)
    )


def _commit(svc: Service, index: int) -> None:
    assert open_round(svc, run_id=RUN) == index
    for key in ISLANDS:
        body = commit_body(index, island=key.ss58_address)
        posted = svc.client.post("/v1/commit", json=signed(key, "commit", body, RUN))
        assert posted.status_code == 200, posted.text
    while round_detail(svc, index, run_id=RUN)["phase"] == "train":
        svc.tick(1)


def _merge(svc: Service, index: int, included: list[Hotkey], excluded: dict[str, str]) -> None:
    body = tape(index, included=sorted(k.ss58_address for k in included), excluded=excluded)
    merged = post_tape(svc, body, run_id=RUN)
    assert merged.status_code == 200, merged.text
    svc.tick(3)


def _record(svc: Service, index: int) -> RoundOpen:
    return RoundOpen.model_validate(round_detail(svc, index, run_id=RUN)["open"]["body"])


def test_a_match_that_never_replayed_the_final_segment_lists_nobody(svc: Service) -> None:
    """Found by an attacker review, fixed. Intake takes a ``match`` naming a
    subset of the assigned segments without the final one (``update_checked`` false): by
    its own body its replay never reached the final state, so the auditor had nothing to
    store. ``stored_carries`` counted any standing ``match`` and listed the island; it now
    lists only an island whose standing ``match`` replayed the final segment."""
    _commit(svc, 0)
    partial = [k for k in _assignment(svc, 0, A)["segments"] if k != LAST]
    assert partial, "carry_doc assigns one random segment besides the final one"
    posted = _verdict(svc, 0, A, "match", segments=partial, update_checked=False)
    assert posted.is_success, posted.text  # a partial match is accepted
    assert _verdict(svc, 0, B, "match", update_checked=True).is_success
    svc.tick(3)
    _merge(svc, 0, [A, B], {})
    _commit(svc, 1)
    record = _record(svc, 1)
    assert B.ss58_address in record.carry_stored  # a full match: stored, listed
    assert A.ss58_address not in record.carry_stored, record.carry_stored


def test_an_island_with_a_proven_fault_and_a_later_match_is_only_fresh(svc: Service) -> None:
    """Defence (passes): B is caught in round 0 (its fault proven by round 1's open) and
    matched in round 1; round 2 starts it fresh and never also lists it as stored (the
    record itself refuses both: tests/attacks_found/test_carry_stored_records.py)."""
    _commit(svc, 0)
    assert _verdict(svc, 0, A, "match", update_checked=True).is_success
    assert _verdict(svc, 0, B, "unverifiable").is_success
    svc.tick(3)
    _merge(svc, 0, [A], {B.ss58_address: "audit_mismatch"})
    _commit(svc, 1)
    assert _record(svc, 1).fresh_start == [B.ss58_address]
    assert _record(svc, 1).carry_stored == [A.ss58_address]
    for key in ISLANDS:
        assert _verdict(svc, 1, key, "match", update_checked=True).is_success
    svc.tick(3)
    _merge(svc, 1, [A, B], {})
    _commit(svc, 2)
    record = _record(svc, 2)
    assert record.fresh_start == [B.ss58_address]
    assert record.carry_stored == [A.ss58_address]


def test_a_standing_fault_next_to_a_match_lists_nobody(svc: Service) -> None:
    """Defence (passes): three auditors, one ``match`` and two ``unverifiable`` on A: the
    fault stands (a majority found it), so A is not listed and uploads its state."""
    _commit(svc, 0)
    assert _verdict(svc, 0, A, "match", update_checked=True).is_success
    assert _verdict(svc, 0, A, "unverifiable", auditor=OTHER_AUDITOR).is_success
    assert _verdict(svc, 0, A, "unverifiable", auditor=THIRD_AUDITOR).is_success
    assert _verdict(svc, 0, B, "match", update_checked=True).is_success
    svc.tick(3)
    _merge(svc, 0, [B], {A.ss58_address: "audit_mismatch"})
    _commit(svc, 1)
    assert _record(svc, 1).carry_stored == [B.ss58_address]


def test_a_split_round_is_listed_on_the_matching_auditors_word(svc: Service) -> None:
    """Pins the current rule (passes; an observation, not a finding): one ``match`` and one
    ``unverifiable`` on A is a ``split`` (held, no standing fault), and A is listed on the
    one ``match``. Safe when that ``match`` was honest (its auditor stored the state); a
    lying ``match`` without a store is the documented residual (the next audit waits)."""
    _commit(svc, 0)
    assert _verdict(svc, 0, A, "match", update_checked=True).is_success
    assert _verdict(svc, 0, A, "unverifiable", auditor=OTHER_AUDITOR).is_success
    assert _verdict(svc, 0, B, "match", update_checked=True).is_success
    svc.tick(3)
    _merge(svc, 0, [B], {A.ss58_address: "audit_mismatch"})
    _commit(svc, 1)
    assert _record(svc, 1).carry_stored == sorted([A.ss58_address, B.ss58_address])


def test_a_match_after_the_open_is_not_listed_that_round(svc: Service) -> None:
    """Defence (passes): a ``match`` that lands after round 1 opened (A's audit pending when
    round 0 merged) lists nobody in the already signed record: A uploads its state."""
    _commit(svc, 0)
    assert _verdict(svc, 0, B, "match", update_checked=True).is_success
    svc.tick(3)
    _merge(svc, 0, [B], {A.ss58_address: "audit_pending"})
    svc.tick(40)
    _commit(svc, 1)
    assert _record(svc, 1).carry_stored == [B.ss58_address]
    late = _verdict(svc, 0, A, "match", update_checked=True)
    assert late.is_success, late.text
    assert _record(svc, 1).carry_stored == [B.ss58_address]  # the record is fixed


def test_a_reset_run_lists_nobody(reset_svc: Service) -> None:
    """Defence (passes): under ``reset`` nothing is stored and nothing is listed, however
    many rounds match."""
    svc = reset_svc
    for index in (0, 1):
        _commit(svc, index)
        for key in ISLANDS:
            assert _verdict(svc, index, key, "match", update_checked=True).is_success
        svc.tick(3)
        _merge(svc, index, list(ISLANDS), {})
    _commit(svc, 2)
    assert _record(svc, 1).carry_stored == [] and _record(svc, 2).carry_stored == []
