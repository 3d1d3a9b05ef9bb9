"""An auditor over the scenario's service. The segment replay itself is stood in for (it is
tested with real islands in tests/auditor): only the choice of work and the posting are real."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hypertrain.api.client import ChallengeClient
from hypertrain.auditor.replay import AuditOutcome
from hypertrain.auditor.runner import Auditor, RoundRecords
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.client import RelayClient
from tests.challenge.dispute_scenario.cast import RUN
from tests.challenge.dispute_scenario.runs import Service
from tests.challenge.helpers import TOKENS


@dataclass(frozen=True, slots=True)
class ReplayStandIn(Auditor):
    """An auditor whose replay always matches; it records what it was asked to judge."""

    judged: list[tuple[int, str]] | None = None

    def judge(self, detail: RoundRecords, assignment: AuditAssignment) -> AuditOutcome:
        assert self.judged is not None
        self.judged.append((assignment.round, assignment.hotkey))
        return AuditOutcome("match", None, True, "re-judged", tuple(assignment.segments))


def stand_in_auditor(
    svc: Service, key: Hotkey, tmp: Path, judged: list[tuple[int, str]]
) -> ReplayStandIn:
    """:class:`ReplayStandIn` for ``key``, reaching the service with the worker token."""
    client = ChallengeClient("http://testserver", worker_token=TOKENS["worker"], http=svc.client)  # type: ignore[arg-type]
    return ReplayStandIn(
        service=client,
        relay=RelayClient("http://127.0.0.1:9", None, RUN),
        key=key,
        manifest=client.manifest(RUN),
        dataset_dir=tmp,
        judged=judged,
    )
