"""The challenge service's JSON answers, one pydantic model per shape, shared by both ends.

Each route declares one of these as its response model, so the service validates what it
sends and the OpenAPI document names every field; :class:`~hypertrain.api.client.
ChallengeClient` parses answers into the same models, so callers read attributes instead
of indexing strings. Models refuse unknown fields: a field the service starts to send is
added here first, in one place, for both ends. Signed records stay :class:`Envelope`;
their bodies are validated by the domain's message model where they are used.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import LayoutSpec, ModelSpec
from hypertrain.protocol.messages import MergeCorrection, MergeTape


class Answer(BaseModel):
    """The base of every answer: unknown fields refused (a field the service starts to send
    is added to its model first, for both ends), values frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Phase = Literal["train", "beacon", "audit", "merge", "settle", "final"]


class BeaconPublic(Answer):
    """``GET /v1/beacon``: the latest verified beacon round the service acts on."""

    round: int | None
    randomness: str | None


class RunListItem(Answer):
    run_id: str
    manifest_digest: str


class VerdictCounts(Answer):
    """A round's standing verdicts: ``match`` those that cleared an island, ``mismatch``
    those that accuse one (``mismatch`` or ``unverifiable``, as settlement counts them)."""

    match: int
    mismatch: int


class RoundSummary(Answer):
    """One row of ``GET /v1/runs/{run}/rounds``: phase, deadlines, commits, audits, loss."""

    round: int
    phase: Phase
    open_beacon_round: int
    commit_deadline_round: int
    selection_beacon_round: int | None
    audit_close_round: int | None
    dispute_deadline_round: int | None
    start_model_sha256: str | None
    new_model_sha256: str | None
    # the round's current merge tape (its latest correction's, if any; None: no tape)
    tape_sha256: str | None = None
    commits: int
    tokens: int
    update_bytes: int
    train_loss: float | None
    eval_loss: float | None
    audits: int
    verdicts: VerdictCounts
    disputes: int
    settled_epoch: int | None


class VerdictRecord(Answer):
    verdict_id: str
    envelope: Envelope


class SelectionBeacon(Answer):
    round: int
    randomness: str
    signature: str


TapeStatus = Literal["not_required", "awaiting", "witnessed", "contested"]


class AttestationRecord(Answer):
    """One witness's signed ``tape-attestation`` and whether the service counts it."""

    witness: str
    tape_sha256: str
    agrees: bool
    first_difference: str | None
    counted: (
        bool  # on the current tape, by a key that holds no other role, listed if a list is kept
    )
    envelope: Envelope


class TapeWitnessView(Answer):
    """The witnesses' word on a round's current tape (docs/mechanism.md, "Tape witnesses").

    ``contested``: a counted witness disagrees, ``first_difference`` is the field it names;
    the round is not settled on that tape. ``awaiting``: fewer than ``required`` counted
    witnesses agree yet. Settlement books the round only when ``not_required`` or
    ``witnessed``."""

    required: int
    tape_sha256: str
    status: TapeStatus
    agreeing: list[str]
    disagreeing: list[str]
    first_difference: str | None
    attestations: list[AttestationRecord]


class AttestationAnswer(Answer):
    """The service stored a witness's attestation."""

    accepted: bool
    round: int
    tape_sha256: str
    witness: str
    attestation_id: str  # SHA-256 of the signed envelope's canonical bytes
    status: TapeStatus  # the round's tape status with this attestation counted


class RoundDetail(Answer):
    """``GET /v1/runs/{run}/rounds/{i}``: the summary's fields with every signed record
    of the round (``commits`` and ``verdicts`` are the records here, not counts)."""

    round: int
    phase: Phase
    open_beacon_round: int
    commit_deadline_round: int
    selection_beacon_round: int | None
    audit_close_round: int | None
    dispute_deadline_round: int | None
    start_model_sha256: str | None
    new_model_sha256: str | None
    tokens: int
    update_bytes: int
    train_loss: float | None
    eval_loss: float | None
    audits: int
    disputes: int
    settled_epoch: int | None
    open: Envelope
    commits: list[Envelope]
    assignments: list[Envelope]
    verdicts: list[VerdictRecord]
    merge: Envelope | None
    selection_beacon: SelectionBeacon | None
    probation: dict[str, bool]
    commit_order: list[str] = []  # committing hotkeys in the order the service accepted them
    # ``merge-correction`` envelopes, oldest first: each supersedes the tape before it
    corrections: list[Envelope] = []
    # the witnesses' word on the current tape (None: the round has no tape yet)
    witnesses: TapeWitnessView | None = None

    def current_merge(self) -> MergeTape | None:
        """The round's merge as it stands: its latest correction's tape, else the merge."""
        if self.corrections:
            return MergeCorrection.model_validate(self.corrections[-1].body).tape
        return MergeTape.model_validate(self.merge.body) if self.merge else None


# ``accused``: a standing fault verdict accuses the island (``accused_rounds`` > 0), still
# disputable while its round is not final; ``proven_fault``: a fault of it is proven
# (booked and burned, ``proven_faults`` > 0: rows of ``GET /faults``).
IslandStatus = Literal["active", "probation", "accused", "proven_fault", "deregistered", "left"]


class RosterEntry(Answer):
    """One island of ``GET /v1/runs/{run}/roster``: admission, record and balances.

    Two facts about faults, never to be confused: ``accused_rounds`` counts the rounds the
    settlement rule faults the island in on a standing non-``match`` verdict (an
    accusation: a dispute may still overturn it until the round is final), and
    ``proven_faults`` the rounds whose fault was proven (booked, its value burned: the
    rows of ``GET /v1/runs/{run}/faults``)."""

    hotkey: str
    uid: int | None
    status: IslandStatus
    device_class: str
    devices: int
    first_round: int
    probation_until_round: int
    commits: int
    tokens: int
    escrow: int
    held: int
    vested: int
    paid: int
    burned: int
    left_round: int | None = None  # the first round opened without it, once it left
    proven_memory_bytes: int = 0  # what its admission challenge proved (0: not proven)
    accused_rounds: int = 0  # rounds a standing fault verdict accuses it in (disputable)
    proven_faults: int = 0  # of those, the rounds whose fault is proven (booked and burned)


class LeaveAnswer(Answer):
    """``POST /v1/leave``: the island trains no round from ``left_round`` on."""

    run_id: str
    hotkey: str
    left_round: int
    leave_id: str  # SHA-256 of the signed envelope's canonical bytes


class LossPoint(Answer):
    round: int
    train_loss: float | None
    eval_loss: float | None
    tokens: int


class RunSummary(Answer):
    """``GET /v1/runs/{run}``: the run at a glance."""

    run_id: str
    manifest_digest: str
    coordinator: str | None
    model: ModelSpec
    inner_steps: int
    checkpoint_interval: int
    rounds: int
    current_round: RoundSummary | None
    islands: int
    islands_by_status: dict[str, int]
    tokens_total: int
    update_bytes_total: int
    audits_total: int
    beacon_round: int | None
    accused_total: int = 0  # the roster's accused_rounds, summed (disputable or proven)
    proven_faults_total: int = 0  # the roster's proven_faults, summed: GET /faults' rows


class AdmissionChallengePublic(Answer):
    """What a join answers instead of admitting when the run sets ``admission.challenge``."""

    seed_beacon_round: int
    answer_deadline_round: int
    workload_steps: int
    devices: int
    deadline_tier: str = ""  # the device-class tier whose deadline the island got


class JoinAnswer(Answer):
    """Admitted (with the island's first round and budget), or challenged first."""

    admitted: bool
    run_id: str
    hotkey: str
    first_round: int | None = None
    probation_until_round: int | None = None
    layout: LayoutSpec | None = None
    samples_per_round: int | None = None
    challenge: AdmissionChallengePublic | None = None


class CommitAnswer(Answer):
    accepted: bool
    run_id: str
    round: int
    hotkey: str
    commit_id: str


class VerdictAnswer(Answer):
    accepted: bool
    verdict_id: str


class ProvenFault(Answer):
    """``GET /v1/runs/{run}/faults``: a *proven* fault of a round (booked once the round
    was final, its value burned), and its rollback state; an accusation that may still be
    disputed is not one (the roster's ``accused_rounds``)."""

    round: int
    hotkey: str
    reason: str
    epoch: int
    merged: bool  # the round's merge included the faulty update
    # the round's current tape still includes it, or a later merged round is not yet
    # rebased onto the corrected chain
    rollback_due: bool


class CorrectionAnswer(Answer):
    accepted: bool
    round: int
    tape_sha256: str
    supersedes_tape_sha256: str
    correction_id: str
    signer: str


class MergeAnswer(Answer):
    accepted: bool
    round: int
    phase: Phase
    paid: dict[str, int]


class MetagraphStatus(Answer):
    epoch: int | None
    block: int | None
    hotkeys: int
    stale: bool
    error: str | None


class BeaconHealth(Answer):
    """The verified beacon round against the round due by the chain's schedule."""

    verified_round: int | None
    due_round: int | None
    lag_rounds: int | None
    lagging: bool


class HealthAnswer(Answer):
    """``GET /health``: readiness (HTTP 200 when the service can score, else 503)."""

    ok: bool
    reason: str | None = None
    metagraph: MetagraphStatus | None = None
    beacon_round: int | None = None
    beacon: BeaconHealth | None = None


class VersionAnswer(Answer):
    slug: str
    version: str
    contract: int
    capabilities: list[str]


class AdmissionStatus(Answer):
    """``GET /v1/runs/{run}/admission/{hotkey}``: an island's admission challenge."""

    run_id: str
    hotkey: str
    status: Literal["pending", "answered", "admitted", "refused"]
    reason: str | None
    seed_beacon_round: int
    answer_deadline_round: int
    workload_steps: int
    seed: int | None  # None until the service has verified the seed round
    memory_claims: list[int] = []  # bytes each device proves (the join's memory_bytes)
    deadline_tier: str = ""  # the device-class tier whose deadline the island got


class AdmissionAnswerAck(Answer):
    """``POST /v1/admission/answer``: the island's hashes are stored for a worker's check."""

    accepted: bool
    status: Literal["answered"]


class PendingAdmission(Answer):
    """One row of ``GET /worker/v1/runs/{run}/admissions``: an answer awaiting a check."""

    hotkey: str
    device_class: str
    seed: int | None
    seed_beacon_round: int
    workload_steps: int
    memory_claims: list[int] = []  # bytes each device claims (its table's size)
    memory_sample: list[tuple[int, int]] = []  # (device, query) pairs to recompute
    memory_answers: list[str] = []  # the island's answers to those pairs, in that order


class WeightsMetadata(Answer):
    """Where an answer came from: the ledger's own answer hash and the metagraph epoch."""

    ledger_answer_sha256: str | None = None
    metagraph_epoch: int | None = None


class WeightsPublic(Answer):
    """``GET /internal/v1/get_weights``: an epoch's weights, stored at first answer and
    repeated byte for byte (canonical JSON of this model)."""

    challenge_slug: str
    epoch: int
    weights: dict[str, float]
    full_share_mass: float
    metadata: WeightsMetadata
    computed_at: int
