"""Strict collection: no verdict means not merged, and a refused verdict is recorded."""

from __future__ import annotations

from hypertrain.aggregator.collect import collect
from hypertrain.protocol.identity import Hotkey
from tests.aggregator.test_attacks import KEYS, World, audited
from tests.challenge.helpers import bearer, signed

__all__ = ["audited"]  # the fixture, shared with the attack tests
AUDITOR = Hotkey.from_seed(b"\x55" * 32)


def _match(w: World, hotkey: str) -> None:
    detail = w.agg.service.round_detail("run-1", 0)
    (a,) = [a for a in detail.assignments if a.body["hotkey"] == hotkey]
    body = {"round": 0, "hotkey": hotkey, "segments": a.body["segments"], "result": "match",
            "update_checked": True}  # fmt: skip
    r = w.client.post(
        "/worker/v1/verdict", headers=bearer("worker"), json=signed(AUDITOR, "verdict", body)
    )
    assert r.status_code == 200, r.text


def test_an_assigned_audit_without_a_verdict_is_not_merged(audited: World) -> None:
    w = audited
    judged, silent = KEYS[0], KEYS[1]
    w.commit(judged, w.update(1))
    w.commit(silent, w.update(2))
    w.tick(4)
    _match(w, judged.ss58_address)
    w.tick(2)
    assert w.agg.step(w.manifest, open_rounds=False) == 1
    merged = w.agg.service.round_detail("run-1", 0).merge.body  # type: ignore[union-attr]
    assert merged["included"] == [judged.ss58_address]
    assert merged["excluded"] == {silent.ss58_address: "audit_pending"}


def test_a_verdict_that_does_not_verify_is_refused_with_its_reason(audited: World) -> None:
    w = audited
    w.commit(KEYS[0], w.update(1))
    w.tick(4)
    _match(w, KEYS[0].ss58_address)
    detail = w.agg.service.round_detail("run-1", 0)
    assert collect(detail, w.manifest, 0).candidates  # the genuine verdict lets it in
    (record,) = detail.verdicts
    forged_env = record.envelope.model_copy(update={"signature": "00" * 64})
    forged = detail.model_copy(
        update={"verdicts": [record.model_copy(update={"envelope": forged_env})]}
    )
    got = collect(forged, w.manifest, 0)
    (refused,) = got.refused_verdicts
    assert refused.verdict_id == record.verdict_id and refused.reason
    assert [e.reason for e in got.excluded] == ["audit_pending"] and not got.candidates
