"""``carry_stored`` against the relay's upload quota: an honest match that is never posted.

docs/auditor.md: under ``carry`` the auditor stores each matched round's carried state on
the relay "signed by its own hotkey, so it counts against the auditor's upload quota
there: about one training state per matched island and round in a probation". The quota
(docs/relay.md) is per hotkey and quota window (default 4 GiB per 100 beacon rounds);
only coordinators are exempt. ``judge_and_post`` stores *before* it posts, and a refused
store (``round_quota_exceeded``, HTTP 413: a refusal, not a peer away) raises out of it:
the honest island's ``match`` is never posted. The auditor retries the assignment
``max_attempts`` passes (each one refused again inside the same window), then gives up;
the audit misses its window and is re-assigned, and the re-audit's ``match``
(:func:`hypertrain.auditor.disputes.rejudge`, which stores nothing:
test_carry_stored_attack_rejudge.py) then lists the island with no state stored.

For the 50m model a training state is 846 MB (docs/traffic.md): with the default 4 GiB
per window one auditor's sixth matched island inside a quota window is refused, so a
probation round of eight islands judged by one auditor loses three verdicts to the
auditor's own quota. Played with the real auditor over an
in-memory relay that refuses the auditor's upload as the real quota does.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

import pytest

from hypertrain.auditor.runner import Auditor, judge_and_post
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.errors import QuotaError
from tests.auditor.islands import BeaconClock, MemoryRelay, published_round
from tests.auditor.world import ISLANDS, World, make_world


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    made = make_world(assets_dir, tmp_path_factory.mktemp("quota-carry"))
    inner = made.manifest.inner.model_copy(update={"state_policy": "carry"})
    return replace(made, manifest=made.manifest.model_copy(update={"inner": inner}))


class _FullQuota(MemoryRelay):
    """The auditor's quota window is used up: every new upload is refused (413)."""

    def put(self, data: bytes, **_: object) -> str:
        raise QuotaError("round_quota_exceeded", "the auditor's bytes in this window are spent")


class _Service(BeaconClock):
    def __init__(self) -> None:
        super().__init__(10**6)
        self.verdicts: list[str] = []

    def verdict(self, envelope: Envelope) -> None:
        self.verdicts.append(envelope.body["result"])


def test_an_honest_match_is_posted_when_the_auditors_store_is_refused(
    world: World, tmp_path: Path
) -> None:
    """Found by an attacker review, fixed. The island is honest and its replay
    matches; the auditor's store of the carried state is refused by its quota. The store
    raised out of the judge, so no verdict was posted at all. Now the store is best effort
    (the island uploads what the relay lacks) and the ``match`` is posted."""
    published, records, index = published_round(world, tmp_path)
    relay = _FullQuota()
    relay.blobs = {k: v for k, v in published.blobs.items() if k != index.carried}
    service = _Service()
    auditor = Auditor(
        service,  # type: ignore[arg-type]
        relay,  # type: ignore[arg-type]
        ISLANDS[2],
        world.manifest,
        world.dataset_dir,
        upload_poll_s=0,
    )
    assignment = AuditAssignment(
        round=0, hotkey=ISLANDS[0].ss58_address, segments=[0, 1], selection_beacon_round=1
    )
    assert auditor.judge(records, assignment).result == "match"  # the island is honest
    with contextlib.suppress(QuotaError):  # the store is refused: raised out of the judge
        judge_and_post(auditor, records, assignment, lambda *_, **__: None)
    assert service.verdicts == ["match"], "the auditor's own quota withheld an honest match"
