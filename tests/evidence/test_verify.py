"""The one verification of public records every role uses (``evidence.verify``): a run
without a coordinator, a verdict no auditor could have given, a commit of another round."""

from __future__ import annotations

from typing import Any

import pytest

from hypertrain.evidence.errors import CommitRoundError, CoordinatorError, VerificationError
from hypertrain.evidence.verify import (
    verify_assignment,
    verify_commit,
    verify_manifest,
    verify_round_open,
    verify_verdict,
)
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from tests.aggregator.helpers import manifest as tiny_manifest

COORD = Hotkey.from_seed(b"\x31" * 32)
ISLAND = Hotkey.from_seed(b"\x32" * 32)
AUDITOR = Hotkey.from_seed(b"\x33" * 32)
RUN = "run-1"


def _seal(key: Hotkey, domain: str, body: dict[str, Any]) -> Envelope:
    return seal(key, domain=domain, run_id=RUN, body=body, expiry_round=10_000)


def _manifest(coordinator: str = COORD.ss58_address) -> RunManifest:
    return tiny_manifest().model_copy(update={"coordinator": coordinator})


def _verdict(**over: Any) -> dict[str, Any]:
    return {"round": 0, "hotkey": ISLAND.ss58_address, "segments": [1], "result": "match",
            "update_checked": True, **over}  # fmt: skip


def _open_body(index: int = 0) -> dict[str, Any]:
    return {"round": index, "start_model_sha256": "ab" * 32, "start_model_url": "memory:x",
            "beacon_round": 1, "assignment_key": "cd" * 32, "roster": [],
            "commit_deadline_round": 5}  # fmt: skip


def test_a_manifest_naming_no_coordinator_is_refused_unless_one_is_pinned() -> None:
    doc = {"manifest": _manifest(coordinator="").model_dump(mode="json")}
    env = _seal(COORD, "manifest", doc).model_dump()
    with pytest.raises(CoordinatorError, match="names no coordinator and none is pinned"):
        verify_manifest(env, RUN, None)
    with pytest.raises(VerificationError, match="another coordinator"):
        verify_manifest(env, RUN, COORD.ss58_address)  # pinned, but the manifest names none
    named = {"manifest": _manifest().model_dump(mode="json")}
    assert verify_manifest(_seal(COORD, "manifest", named).model_dump(), RUN, None).coordinator


def test_records_of_a_run_without_a_coordinator_are_refused_not_trusted() -> None:
    """The aggregator's own check skipped the signer when the coordinator was empty: any
    key could open a round or assign an audit. Evidence refuses both."""
    anyone = _manifest(coordinator="")
    opened = _seal(ISLAND, "round-open", _open_body())
    with pytest.raises(CoordinatorError, match="names no coordinator"):
        verify_round_open(opened, anyone, 0)
    body = {"round": 0, "hotkey": ISLAND.ss58_address, "segments": [0],
            "selection_beacon_round": 3}  # fmt: skip
    assignment = _seal(ISLAND, "audit-assignment", body)
    with pytest.raises(CoordinatorError):
        verify_assignment(assignment, anyone, 0)


def test_an_assignment_for_another_round_or_outside_the_round_is_refused() -> None:
    m = _manifest()
    body = {"round": 0, "hotkey": ISLAND.ss58_address, "segments": [1],
            "selection_beacon_round": 3}  # fmt: skip
    assert verify_assignment(_seal(COORD, "audit-assignment", body), m, 0).segments == [1]
    with pytest.raises(VerificationError, match="not 1"):
        verify_assignment(_seal(COORD, "audit-assignment", body), m, 1)
    wide = _seal(COORD, "audit-assignment", {**body, "segments": [m.round.num_segments]})
    with pytest.raises(VerificationError, match="outside the round"):
        verify_assignment(wide, m, 0)


@pytest.mark.parametrize(
    ("signer", "over", "assigned", "match"),
    [
        (ISLAND, {}, {ISLAND.ss58_address: [1]}, "signed by that island itself"),
        (AUDITOR, {"round": 1}, {ISLAND.ss58_address: [1]}, "not 0"),
        (AUDITOR, {}, {}, "not assigned"),
        (AUDITOR, {"segments": [0]}, {ISLAND.ss58_address: [1]}, r"segments \[0\]"),
        (AUDITOR, {"segments": []}, {ISLAND.ss58_address: [1]}, r"segments \[\]"),
    ],
    ids=["self-judged", "other round", "unassigned", "other segments", "no segments"],
)
def test_a_verdict_no_assigned_audit_supports_is_refused(
    signer: Hotkey, over: dict[str, Any], assigned: dict[str, list[int]], match: str
) -> None:
    env = _seal(signer, "verdict", _verdict(**over))
    with pytest.raises(VerificationError, match=match):
        verify_verdict(env, _manifest(), 0, assigned)


def test_an_auditors_verdict_on_its_assigned_segments_verifies() -> None:
    env = _seal(AUDITOR, "verdict", _verdict())
    got = verify_verdict(env, _manifest(), 0, {ISLAND.ss58_address: [0, 1]})
    assert (got.hotkey, got.result, got.segments) == (ISLAND.ss58_address, "match", [1])


def test_a_commit_of_another_round_carries_its_body() -> None:
    m = _manifest()
    body = {"round": 3, "checkpoint_root": "ef" * 32, "leaf_count": m.round.num_segments + 1,
            "update_sha256": "12" * 32, "update_bytes": 10, "tokens": 5,
            "update_url": "memory:u"}  # fmt: skip
    env = _seal(ISLAND, "commit", body)
    with pytest.raises(CommitRoundError, match="not 0") as caught:
        verify_commit(env, m, ISLAND.ss58_address, 0)
    assert caught.value.commit.update_sha256 == "12" * 32
    assert verify_commit(env, m, ISLAND.ss58_address, 3).tokens == 5
