"""The dashboard document, ``GET /v1/runs/{run_id}/dashboard``, as one typed contract.

The route declares :class:`Dashboard` as its response model, so the page and any
other reader see the same named fields. The panels added for disputes, honeypots and
traffic are typed to the leaf; the older, wider panels (rounds, islands, audits)
are lists of records whose fields the OpenAPI document lists as objects.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from hypertrain.challenge.models import HoneypotRow
from hypertrain.dispute.narrowing import NarrowStep


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TrafficTotal(_Doc):
    """A sum of rounds: the bytes the islands' links carried, the data-parallel bytes for
    the same tokens (bf16 ring all-reduce every step, sent and received), and the ratio
    (data-parallel over ours) in number and in words ("N× less than data-parallel")."""

    rounds: int
    honest_bytes: int
    data_parallel_bytes: int
    ratio: float | None
    words: str
    parts: dict[str, int]


class TrafficPanel(_Doc):
    """The traffic tile and panel: every round, the steady-state rounds (no island in
    probation) and the probation rounds, all from ``protocol.traffic.summarize``."""

    all: TrafficTotal
    steady: TrafficTotal
    probation: TrafficTotal
    formula: str


class Glance(_Doc):
    status: str
    round: int | None
    phase: str | None
    rounds_done: int  # rounds merged (settling or final): the outer steps taken
    rounds_total: int  # rounds the manifest's schedule plans (inner total_steps / H)
    heldout_loss: float | None
    first_heldout_loss: float | None
    islands: int
    tokens_per_s: float
    tokens: int
    bytes_sent: int
    traffic: TrafficPanel
    audits: int
    faults: int
    beacon_round: int | None


class HoneypotPanelRow(HoneypotRow):
    """One strategy of the revealed list (the public table's row) with its rates.

    ``catch_rate`` is caught / rounds run (a cheating honeypot cheats every round);
    ``false_positive_rate`` is false positives / rounds audited (honest honeypots).
    """

    catch_rate: float | None = None
    false_positive_rate: float | None = None


class HoneypotPanel(_Doc):
    """The operator's committed honeypot periods; the table over those revealed so far."""

    committed: bool
    commitment: str  # the manifest's (period 0)
    reveal_round: int
    revealed: bool
    revealed_beacon_round: int | None  # the latest reveal's
    periods: int = 0
    periods_revealed: int = 0
    rows: list[HoneypotPanelRow]


class NarrowingStep(NarrowStep):
    """One typed narrowing step of a dispute (the game's own record), with its text."""

    text: str  # rendered by ``dispute.narrowing.describe``; nothing reads it back


class DisputePanelRow(_Doc):
    dispute_id: str
    round: int
    segment: int
    hotkey: str
    auditor: str
    bond: int
    stage: str
    step: int | None  # the one step the parties disagree on, once found
    section: str | None  # the first section (layer) of that step whose digests differ
    op: str | None  # the contested operation
    referee: str | None  # the referee whose ruling decided the game
    outcome: str | None
    reason: str
    opened_beacon_round: int
    decided_beacon_round: int | None
    deadline_round: int | None  # of the open query; None once decided
    messages: int
    bytes_in: int
    steps: list[NarrowingStep]


class CurvePoint(_Doc):
    round: int
    heldout_loss: float | None
    train_loss_self_reported: float | None


class Dashboard(_Doc):
    """Everything the dashboard draws for one run, from one consistent read."""

    run_id: str
    glance: Glance
    beacon: dict[str, Any]
    model: dict[str, Any]
    curve: list[CurvePoint]
    curve_summary: dict[str, Any] | None
    round_stations: dict[str, Any]
    islands: list[dict[str, Any]]
    rounds: list[dict[str, Any]]
    audits: list[dict[str, Any]]
    traffic: TrafficPanel
    honeypots: HoneypotPanel
    disputes: list[DisputePanelRow]
