"""The dashboard document, ``GET /v1/runs/{run_id}/dashboard``, as one typed contract.

The route declares :class:`Dashboard` as its response model, so the page and any
other reader see the same named fields. The panels added for disputes, honeypots and
traffic, like the rounds, islands and audits, are typed to the leaf.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hypertrain.api.disputes import HoneypotRow
from hypertrain.api.models import BeaconHealth, RosterEntry, RoundSummary
from hypertrain.dispute.narrowing import NarrowStep
from hypertrain.protocol.manifest import ModelSpec, MoESpec


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


class AllInTraffic(_Doc):
    """The headline: every round plus the warm start, whose data-parallel steps
    (``warm_start_bytes``: on a ring of round 0's islands) count on both sides
    (``protocol.traffic.AllIn``)."""

    rounds: int
    honest_bytes: int
    data_parallel_bytes: int
    warm_start_bytes: int
    ratio: float | None
    words: str


class ExpectedTraffic(_Doc):
    """The steady state at the manifest's audit rate instead of one run's draw of audits:
    the steady rounds' bytes other than checkpoints, per round, plus ``audit_rate`` ×
    the islands of a round × ``uploads_per_audit`` training states (forced re-audits of
    proven cheats left out: a cheat's cost, not the network's)."""

    audit_rate: float
    audits_per_round: float
    uploads_per_audit: float
    bytes_per_round: int
    data_parallel_bytes_per_round: int
    ratio: float
    words: str


class TrafficPanel(_Doc):
    """The traffic tile and panel: every round with the warm start (``all_in``, the
    headline; None in a document from before it), every round, the steady-state rounds (no
    island in probation) and the probation rounds, all from ``protocol.traffic``, and the
    steady state expected at the audit rate (None before a steady round)."""

    all_in: AllInTraffic | None = None
    all: TrafficTotal
    steady: TrafficTotal
    probation: TrafficTotal
    formula: str
    expected: ExpectedTraffic | None = None


class Glance(_Doc):
    status: str
    round: int | None
    phase: str | None
    rounds_done: int  # rounds merged (settling or final): the outer steps taken
    rounds_total: int  # rounds the schedule plans ((inner total_steps - warm start) / H)
    heldout_loss: float | None
    first_heldout_loss: float | None
    islands: int
    tokens_per_s: float  # the islands taking part, over the rounds merged with them
    tokens: int  # merged into the model: a round's tokens of the islands its merge included
    bytes_sent: int
    traffic: TrafficPanel
    audits: int
    beacon_round: int | None
    accused: int = 0  # rounds an island is accused in (a standing fault verdict), summed
    proven_faults: int = 0  # of those, the faults proven (booked and burned: GET /faults)


class HoneypotPanelRow(HoneypotRow):
    """One strategy of the revealed list (the public table's row) with its rates.

    For a cheat, ``rounds_cheated`` counts the rounds its honeypots ran from the round
    each list entry says it started cheating (``cheats_from_round``; every round of the
    period when the entry says none: ``every_round_assumed``), ``caught_cheating`` those
    of them the settlement rule faulted, and ``catch_rate`` is their ratio.
    ``false_positive_rate`` is false positives / rounds audited (honest honeypots).
    """

    rounds_cheated: int | None = None
    caught_cheating: int | None = None
    every_round_assumed: bool = False
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


class BaselineGap(_Doc):
    """The network's held-out loss against the baseline's at the latest round both have:
    ``gap_pct`` is 100 × (network / baseline − 1), positive when the network is behind."""

    round: int
    heldout_loss: float
    baseline_loss: float
    gap_pct: float


class BaselinePanel(_Doc):
    """The operator's data-parallel baseline curve (``heldout_loss[r]``: after round ``r``),
    drawn beside the network's. Informational only: an unsigned operator claim that never
    feeds a hash, a verdict or a reward."""

    label: str
    heldout_loss: list[float]
    updated_beacon_round: int
    gap: BaselineGap | None


class DashBeacon(BeaconHealth):
    """The beacon chain's timing (to turn rounds into seconds) and the clock's lag."""

    genesis_unix: int
    period_s: int


class InnerCard(_Doc):
    name: str
    lr: float
    weight_decay: float
    steps_per_round: int
    checkpoint_interval: int


class OuterCard(_Doc):
    """The outer optimizer; ``words`` says what it does ("plain averaging" for lr 1 and
    no momentum: the new model is the average of the islands' models)."""

    name: str
    lr: float
    momentum: float
    words: str


class CompressionCard(_Doc):
    """The update codec: blockwise (``block_size``) or sparse top-k (the chunk fields)."""

    codec: str
    error_feedback: bool
    entropy: bool = False  # the blockwise codes entropy coded (lossless)
    block_size: int | None = None
    chunk_size: int | None = None
    topk_per_chunk: int | None = None
    value_bits: int | None = None


class ModelCard(_Doc):
    spec: ModelSpec
    preset: str | None
    layers: int
    d_model: int
    heads: int
    context: int
    vocab: int
    parameters: int
    moe: MoESpec | None
    inner: InnerCard
    outer: OuterCard
    compression: CompressionCard


class LossAt(_Doc):
    round: int
    loss: float


class Spike(LossAt):
    rise: float


class CurveSummary(_Doc):
    """Start, last, drop since the first round, lowest and highest with their rounds, spike."""

    start: LossAt
    last: LossAt
    drop: float
    drop_pct: float | None
    lowest: LossAt
    highest_after_first: LossAt | None
    spike: Spike | None
    rounds_done: int  # the glance's figure: rounds merged
    rounds_total: int  # the glance's figure: rounds the schedule plans


class Station(_Doc):
    id: str
    name: str
    what: str


class RoundStations(_Doc):
    """The round's stations and the one the current round is at (None before round 0)."""

    stations: list[Station]
    current: str | None
    round: int | None


class DeviceCard(_Doc):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    index: int
    name: str
    device_class: str = Field(alias="class")


class NodeCard(_Doc):
    node: str
    devices: list[DeviceCard]


class IslandCard(RosterEntry):
    """A roster entry with its hardware, its speed and its share of the run's tokens."""

    nodes: list[NodeCard]
    device_model: str | None
    region: str | None
    last_sync_unix: int | None
    name: str
    rounds: int
    tokens_merged: int  # of its committed ``tokens``, those in rounds merged with it
    tokens_per_s: float | None  # tokens_merged over those rounds' compute time
    share: float  # of the run's merged tokens
    steps_done: int
    steps_total: int
    last_sync_round: int | None


class DashRound(RoundSummary):
    """A round of the rounds table: the summary with timing and its traffic count."""

    islands: int
    started_unix: int
    compute_s: int | None
    sync_s: int | None
    bytes_sent: int
    traffic: dict[str, int]
    honest_bytes: int
    data_parallel_bytes: int
    probation: bool
    ratio: float | None
    ratio_words: str


class AuditVerdict(_Doc):
    auditor: str
    result: str
    first_bad_leaf: int | None
    detail: str
    counts: bool  # False when a dispute overturned it or its auditor was found faulty


class AuditDispute(_Doc):
    status: str
    reason: str


class AuditRow(_Doc):
    round: int
    hotkey: str
    segments: list[int]
    probation: bool
    beacon_round: int | None
    beacon_randomness: str | None
    verdicts: list[AuditVerdict]
    disputes: list[AuditDispute]
    accused: bool  # the round's outcome faults the island (a standing fault verdict)


class UtilisationRow(_Doc):
    """One island (or, ``hotkey`` None, all islands together) over the finished rounds
    it was on the roster of: wall time (each round's opening to the next round's),
    ``busy_s`` (opening to its accepted commit: an upper bound of compute, download and
    preparation included) and every other second by cause (:data:`UtilisationPanel.causes`;
    a boundary the service did not record joins two causes, ``audit+merge``). Busy plus
    the waits is the wall time; a figure that cannot be computed is None."""

    hotkey: str | None
    name: str
    rounds: int  # finished rounds on the roster
    committed: int  # of them, rounds with an accepted commit (the others count as missed)
    wall_s: int | None  # None: no finished round
    busy_s: int | None
    busy: float | None  # busy_s / wall_s
    waiting_s: dict[str, int]
    waiting_share: dict[str, float]  # of wall_s


class UtilisationPanel(_Doc):
    """Island utilisation across the whole run from the service's own records (round
    openings, accepted commits, selection beacon rounds, verdicts, merge tapes), in beacon
    rounds of ``period_s`` seconds: public, not self-reported, and early by up to a period."""

    rounds: int  # finished rounds: the next round opened
    period_s: int
    causes: list[str]  # every cause the rows name, in the order an island meets them
    busy_words: str
    all: UtilisationRow
    islands: list[UtilisationRow]


class Dashboard(_Doc):
    """Everything the dashboard draws for one run, from one consistent read."""

    run_id: str
    glance: Glance
    beacon: DashBeacon
    model: ModelCard
    curve: list[CurvePoint]
    curve_summary: CurveSummary | None
    baseline: BaselinePanel | None  # the operator's published data-parallel curve, if any
    round_stations: RoundStations
    islands: list[IslandCard]
    rounds: list[DashRound]
    audits: list[AuditRow]
    traffic: TrafficPanel
    honeypots: HoneypotPanel
    disputes: list[DisputePanelRow]
    utilisation: UtilisationPanel
