"""The challenge service's answers about disputes, reassigned audits and honeypots.

Part of the answer models (:mod:`hypertrain.api.models` holds the rounds', the roster's and
the platform's): the dispute routes answer the game's stored record (``DisputeView``,
defined in ``hypertrain.dispute.view``, stored by ``challenge.store.game_storage``),
one named model per route.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from hypertrain.api.models import Answer
from hypertrain.dispute.view import DisputeView
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.honeypots import HoneypotList


class ReassignedAudit(Answer):
    """One row of ``GET /v1/runs/{run}/reassigned``: an audit waiting for a verdict.

    Either its verdict stopped counting (its auditor was found faulty by dispute
    ``dispute_id``, or a ``recompute`` dispute waits for a quorum of re-audits), or
    ``missed``: it was assigned and had no verdict when its audit phase ended (then
    ``auditor``, ``verdict_id`` and ``dispute_id`` are empty). The island's reward for
    the round is held until another auditor's verdict comes.
    """

    round: int
    hotkey: str
    auditor: str
    verdict_id: str
    dispute_id: str
    assignment: Envelope
    missed: bool = False


class DisputeOpened(DisputeView):
    """``POST /v1/disputes``: the new game's record, its first query open."""


class DisputeAnswered(DisputeView):
    """``POST /v1/disputes/{id}/answer``: the game after the accepted answer."""


class DisputeRuled(DisputeView):
    """``POST /v1/disputes/{id}/ruling``: the game after the referee's ruling (decided)."""


class HoneypotRow(Answer):
    """One row of the public honeypot table: a role and strategy, summed over its hotkeys.

    Islands carry rounds run and audited; cheats carry ``caught`` and ``missed``, honest
    islands ``false_positives`` (rounds the settlement rule faulted them: disputes won and
    ``unverifiable`` counted as settlement counts them); auditors carry ``verdicts``.
    Both carry disputes.
    """

    role: Literal["island", "auditor"]
    strategy: str
    hotkeys: int
    rounds_run: int | None = None
    audited: int | None = None
    caught: int | None = None
    missed: int | None = None
    false_positives: int | None = None
    verdicts: int | None = None
    disputes_won: int
    disputes_lost: int


class HoneypotPeriodPublic(Answer):
    """One committed period of honeypots: its rounds, commitment and, once revealed, list.

    ``committed_beacon_round`` is when the service accepted the commitment (0: in the
    manifest), always before ``first_round`` opened."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    period: int
    first_round: int
    last_round: int
    commitment: str
    committed_beacon_round: int
    revealed: HoneypotList | None = Field(default=None, alias="list")
    revealed_beacon_round: int | None = None


class HoneypotAnswer(Answer):
    """``GET /v1/runs/{run}/honeypots``: every period (revealed lists included) and the
    table accumulated over the revealed ones."""

    periods: list[HoneypotPeriodPublic]
    table: list[HoneypotRow]


class HoneypotRevealAck(Answer):
    """``POST /admin/v1/runs/{run}/honeypots``: the list hashed to its period's commitment."""

    revealed: bool
    period: int
    commitment: str
    entries: int
