"""Honeypot routes: the committed periods and the per-strategy table (public); a period's
commitment and the reveal of its list (admin).

A revealed list must hash to the commitment its period published before its first round;
the table counts only revealed periods.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from hypertrain.api.disputes import HoneypotAnswer, HoneypotPeriodPublic, HoneypotRevealAck
from hypertrain.challenge import honeypots
from hypertrain.challenge.deps import ERRORS, State, require_admin, serialized
from hypertrain.protocol.honeypots import HoneypotList, HoneypotPeriod

public = APIRouter(prefix="/v1", tags=["honeypots"])
admin = APIRouter(prefix="/admin/v1", dependencies=[Depends(require_admin)], tags=["honeypots"])


@public.get("/runs/{run_id}/honeypots", responses=ERRORS, response_model=HoneypotAnswer)
@serialized
def honeypot_table(state: State, run_id: str) -> HoneypotAnswer:
    """Every committed honeypot period (revealed lists included) and the per-strategy table
    accumulated over the revealed ones."""
    manifest = state.manifest(run_id)
    rows = honeypots.table(state.conn, manifest, run_id)  # not_revealed (404) till a reveal
    return HoneypotAnswer(periods=honeypots.periods(state.conn, manifest, run_id), table=rows)


@public.get(
    "/runs/{run_id}/honeypots/periods",
    responses=ERRORS,
    response_model=list[HoneypotPeriodPublic],
)
@serialized
def honeypot_periods(state: State, run_id: str) -> list[HoneypotPeriodPublic]:
    """The committed periods: rounds, commitment, when committed; lists once revealed."""
    return honeypots.periods(state.conn, state.manifest(run_id), run_id)


@admin.post("/runs/{run_id}/honeypots", responses=ERRORS, response_model=HoneypotRevealAck)
@serialized
def reveal_honeypots(state: State, run_id: str, payload: HoneypotList) -> HoneypotRevealAck:
    """Publish a period's list (its last round final); it must hash to that period's
    commitment, the period found by the commitment it matches."""
    manifest = state.manifest(run_id)
    return honeypots.reveal(state.conn, manifest, state.current_round, run_id, payload)


@admin.post(
    "/runs/{run_id}/honeypots/periods/{period}/reveal",
    responses=ERRORS,
    response_model=HoneypotRevealAck,
)
@serialized
def reveal_period(
    state: State, run_id: str, period: int, payload: HoneypotList
) -> HoneypotRevealAck:
    """Publish the list of one named period; it must hash to that period's commitment."""
    manifest = state.manifest(run_id)
    return honeypots.reveal(state.conn, manifest, state.current_round, run_id, payload, period)


@admin.post(
    "/runs/{run_id}/honeypots/periods", responses=ERRORS, response_model=HoneypotPeriodPublic
)
@serialized
def commit_period(state: State, run_id: str, payload: HoneypotPeriod) -> HoneypotPeriodPublic:
    """Commit the next period's list (rounds, SHA-256 of the list) before its first round."""
    manifest = state.manifest(run_id)
    return honeypots.commit_period(state.conn, manifest, state.current_round, run_id, payload)


router = APIRouter()
for part in (public, admin):
    router.include_router(part)
