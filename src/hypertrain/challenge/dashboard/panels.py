"""Extra panels of the dashboard document: stations, island hardware, curve summary,
honest traffic, honeypots and disputes.

Everything is derived from public records: the phase of the current round, the
islands' signed join requests (devices, optional node and region), the merges'
beacon rounds, the held-out losses the aggregator posted, the revealed honeypot
list, and the dispute games with their typed narrowing steps.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

from hypertrain.api.disputes import HoneypotRow
from hypertrain.api.models import RoundSummary
from hypertrain.challenge import honeypots
from hypertrain.challenge.dashboard.models import (
    AllInTraffic,
    CurvePoint,
    CurveSummary,
    DeviceCard,
    DisputePanelRow,
    ExpectedTraffic,
    HoneypotPanel,
    HoneypotPanelRow,
    LossAt,
    NarrowingStep,
    NodeCard,
    RoundStations,
    Spike,
    Station,
    TrafficPanel,
)
from hypertrain.challenge.dashboard.models import TrafficTotal as TrafficTotalCard
from hypertrain.challenge.disputes import games
from hypertrain.challenge.rounds import views
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.store import audit_storage, game_storage, roster_storage
from hypertrain.dispute.narrowing import NarrowStep, describe
from hypertrain.protocol.messages import JoinRequest
from hypertrain.protocol.traffic import FORMULA, AllIn, TrafficSummary, TrafficTotal

STATIONS: Final = (
    ("open", "Open", "the round opens at a beacon round with the start model"),
    ("train", "Train", "every island runs H inner steps on its assigned samples"),
    ("commit", "Commit", "each island signs the Merkle root of its state hashes"),
    ("beacon", "Beacon", "the first beacon round after the close picks the audits"),
    ("audit", "Audit", "auditors replay the chosen segments bit for bit"),
    ("merge", "Merge", "the aggregator averages the updates and takes an outer step"),
    ("settle", "Settle", "rewards go to escrow and vest; a proven fault burns"),
)


def stations(current: RoundSummary | None) -> RoundStations:
    """The round's stations and the one the current round is at (None before round 0)."""
    names = [Station(id=i, name=n, what=w) for i, n, w in STATIONS]
    if current is None:
        return RoundStations(stations=names, current=None, round=None)
    phase = current.phase
    at = {"beacon": "beacon", "audit": "audit", "merge": "merge", "final": "settle"}.get(phase)
    if phase == "train":
        at = "commit" if current.commits else "train"
    return RoundStations(stations=names, current=at, round=current.round)


@dataclass(frozen=True, slots=True)
class Hardware:
    """An island's devices (on one node: join requests name no nodes), model and region."""

    nodes: list[NodeCard]
    device_model: str | None
    region: str | None


def island_hardware(conn: sqlite3.Connection, run_id: str, hotkey: str) -> Hardware:
    """Devices, the most common device model and the region, from the join request."""
    text = roster_storage.join_body(conn, run_id, hotkey)
    if text is None:
        return Hardware([], None, None)
    body = JoinRequest.model_validate_json(text)
    devices = [
        DeviceCard(index=d.index, name=d.name, device_class=d.device_class) for d in body.devices
    ]
    models = Counter(d.name for d in body.devices)
    return Hardware(
        nodes=[NodeCard(node="0", devices=devices)],
        device_model=models.most_common(1)[0][0],
        region=body.region,
    )


def curve_summary(
    curve: list[CurvePoint], rounds_done: int, rounds_total: int
) -> CurveSummary | None:
    """Start, last, drop since the first round, lowest and highest with their rounds, spike,
    and the glance's rounds done of the rounds planned (one figure on the page)."""
    pts = [(p.round, float(p.heldout_loss)) for p in curve if p.heldout_loss is not None]
    if not pts:
        return None
    (r0, first), (rn, last) = pts[0], pts[-1]
    low = min(pts, key=lambda p: p[1])
    later = pts[1:]
    high = max(later, key=lambda p: p[1]) if later else None
    rises = [(b[0], b[1], b[1] - a[1]) for a, b in pairwise(pts) if b[1] > a[1]]
    spike = max(rises, key=lambda x: x[2]) if rises else None
    return CurveSummary(
        start=LossAt(round=r0, loss=first),
        last=LossAt(round=rn, loss=last),
        drop=first - last,
        drop_pct=(first - last) / first if first else None,
        lowest=LossAt(round=low[0], loss=low[1]),
        highest_after_first=LossAt(round=high[0], loss=high[1]) if high else None,
        spike=Spike(round=spike[0], loss=spike[1], rise=spike[2]) if spike else None,
        rounds_done=rounds_done,
        rounds_total=rounds_total,
    )


def _traffic_total(t: TrafficTotal) -> TrafficTotalCard:
    return TrafficTotalCard(
        rounds=t.rounds,
        honest_bytes=t.ours_bytes,
        data_parallel_bytes=t.data_parallel,
        ratio=t.ratio,
        words=t.words,
        parts=t.ours.parts(),
    )


def all_in_card(all_in: AllIn) -> AllInTraffic:
    return AllInTraffic(
        rounds=all_in.rounds.rounds,
        honest_bytes=all_in.ours_bytes,
        data_parallel_bytes=all_in.data_parallel,
        warm_start_bytes=all_in.warm_start,
        ratio=all_in.ratio,
        words=all_in.words,
    )


def traffic_panel(
    summary: TrafficSummary, expected: ExpectedTraffic | None = None, warm_start: int = 0
) -> TrafficPanel:
    """The run's traffic against data-parallel: all-in (every round and the warm start's
    ``warm_start`` data-parallel bytes), all rounds, steady state, probation, and the
    steady state expected at the audit rate."""
    return TrafficPanel(
        all_in=all_in_card(AllIn(summary.all, warm_start)),
        all=_traffic_total(summary.all),
        steady=_traffic_total(summary.steady),
        probation=_traffic_total(summary.probation),
        formula=FORMULA,
        expected=expected,
    )


def honeypot_panel(state: ServiceState, run_id: str) -> HoneypotPanel:
    """The committed periods and, over the revealed ones, each strategy's catch and
    false-positive rate."""
    manifest = state.manifest(run_id)
    spec = manifest.honeypots
    known = honeypots.periods(state.conn, manifest, run_id)
    done = [p for p in known if p.revealed is not None]
    rows = []
    if done:
        cheating = _cheating(state, run_id)
        table = honeypots.table(state.conn, manifest, run_id)
        rows = [_rated(r, cheating.get(r.strategy)) for r in table]
    return HoneypotPanel(
        committed=bool(known),
        commitment=spec.commitment,
        reveal_round=spec.reveal_round,
        revealed=bool(done),
        revealed_beacon_round=done[-1].revealed_beacon_round if done else None,
        periods=len(known),
        periods_revealed=len(done),
        rows=rows,
    )


@dataclass(slots=True)
class _Cheating:
    """A cheating strategy's rounds run while cheating and the ones of them caught."""

    rounds: int = 0
    caught: int = 0
    every_round_assumed: bool = False  # an entry named no first cheating round


def _cheating(state: ServiceState, run_id: str) -> dict[str, _Cheating]:
    """Per cheating island strategy, over the revealed periods: the rounds its honeypots
    ran from the round each entry says it started cheating (the period's first round
    when it says none), and the rounds of those the settlement rule faulted."""
    accused = views.run_accusations(state, run_id)
    out: dict[str, _Cheating] = {}
    for period in honeypots.revealed(state.conn, state.manifest(run_id), run_id):
        assert period.revealed is not None
        for e in period.revealed.entries:
            if e.role != "island" or e.strategy == "honest":
                continue
            tally = out.setdefault(e.strategy, _Cheating())
            tally.every_round_assumed |= e.cheats_from_round is None
            first = max(period.first_round, e.cheats_from_round or 0)
            if first > period.last_round:
                continue
            span = audit_storage.island_span(state.conn, run_id, e.hotkey, first, period.last_round)
            tally.rounds += span.rounds_run
            tally.caught += sum(
                1
                for i, hit in accused.items()
                if first <= i <= period.last_round and e.hotkey in hit
            )
    return out


def _rated(r: HoneypotRow, cheating: _Cheating | None) -> HoneypotPanelRow:
    """An island row's catch rate (cheats: caught / rounds cheated) or false-positive rate
    (honest: false positives / rounds audited)."""
    if r.role != "island":
        return HoneypotPanelRow(**r.model_dump())
    if r.strategy == "honest":
        audited = r.audited or 0
        rate = (r.false_positives or 0) / audited if audited else None
        return HoneypotPanelRow(**r.model_dump(), false_positive_rate=rate)
    c = cheating or _Cheating()
    return HoneypotPanelRow(
        **r.model_dump(),
        rounds_cheated=c.rounds,
        caught_cheating=c.caught,
        every_round_assumed=c.every_round_assumed,
        catch_rate=c.caught / c.rounds if c.rounds else None,
    )


def narrowing_row(step: NarrowStep) -> NarrowingStep:
    """One typed narrowing step of a game, as the panel shows it (text rendered here)."""
    return NarrowingStep(**step.model_dump(), text=describe(step))


def dispute_rows(state: ServiceState, run_id: str) -> list[DisputePanelRow]:
    """Every dispute of the run with its narrowing so far, newest first."""
    out = []
    state.manifest(run_id)
    for view in games.listing(state.conn, run_id, None, None):
        game = view.game
        out.append(
            DisputePanelRow(
                dispute_id=view.dispute_id,
                round=view.round,
                segment=game.segment,
                hotkey=view.hotkey,
                auditor=view.auditor,
                bond=view.bond,
                stage=game.stage,
                step=game.step,
                section=None if game.section is None else game.sections[game.section],
                op=game.op.op if game.op else None,
                referee=game_storage.ruling_signer(state.conn, view.dispute_id),
                outcome=game.outcome,
                reason=game.reason,
                opened_beacon_round=view.opened_beacon_round,
                decided_beacon_round=view.decided_beacon_round,
                deadline_round=None if game.stage == "decided" else game.deadline_round,
                messages=game.messages,
                bytes_in=view.bytes_in,
                steps=[narrowing_row(step) for step in game.steps],
            )
        )
    return out[::-1]
