"""Bodies of the signed messages, one pydantic model per envelope domain.

``DOMAINS`` maps each envelope domain to its body model; services look the model
up there, so a message kind and its schema are defined exactly once.
JSON Schemas are generated from these models (``python -m hypertrain.ops.schemas DIR``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hypertrain.protocol.exclusions import ExclusionReason
from hypertrain.protocol.manifest import LayoutSpec, RunManifest

_HEX64 = r"^[0-9a-f]{64}$"
_SS58 = r"^[1-9A-HJ-NP-Za-km-z]{40,60}$"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceReport(_Body):
    """One device's compute self-check result and its memory claim.

    ``memory_bytes`` is the memory the device claims and, under the admission challenge,
    proves by holding a table of that size (docs/mechanism.md, "Memory proof")."""

    index: int = Field(ge=0)
    name: str = Field(max_length=128)
    device_class: str = Field(max_length=128)
    memory_bytes: int = Field(ge=0, le=1 << 40)
    workload_hash: str = Field(pattern=_HEX64)


class JoinRequest(_Body):
    """A hotkey asks to join a run as an island."""

    devices: list[DeviceReport] = Field(min_length=1, max_length=1024)
    layout: LayoutSpec
    endpoint: str | None = Field(default=None, max_length=512)
    # Where the island runs, as its operator states it (shown on the dashboard; unchecked).
    region: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z0-9 ._,()/-]+$")


class ManifestRecord(_Body):
    """The coordinator-signed run manifest."""

    manifest: RunManifest


class RoundOpen(_Body):
    """The coordinator-signed record that opens a round."""

    round: int = Field(ge=0)
    start_model_sha256: str = Field(pattern=_HEX64)
    start_model_url: str = Field(max_length=1024)
    beacon_round: int = Field(ge=0)
    assignment_key: str = Field(pattern=_HEX64)
    roster: list[str] = Field(max_length=65536)
    commit_deadline_round: int = Field(ge=0)
    # Each island's admitted layout, keyed by hotkey; an island missing here trains
    # with the manifest's default layout (records written before layouts existed).
    layouts: dict[str, LayoutSpec] = Field(default_factory=dict, max_length=65536)
    # Rostered islands that start this round from the public reset state of the start
    # model whatever they did in the round before: those with a proven fault in an
    # earlier round (evidence.start). Omitted from the signed body when empty, so a
    # record naming nobody keeps the bytes records had before the field existed.
    fresh_start: list[str] = Field(
        default_factory=list, max_length=65536, exclude_if=lambda v: not v
    )
    # Rostered islands whose final state of the round before an auditor replayed, matched
    # and stored on the relay (a standing ``match`` verdict there, under ``carry``): an
    # audit of them this round fetches that state from the relay, so they upload nothing
    # for it (miner.checkpoints). Omitted when empty, as ``fresh_start`` is.
    carry_stored: list[str] = Field(
        default_factory=list, max_length=65536, exclude_if=lambda v: not v
    )

    @model_validator(mode="after")
    def _layouts_of_roster(self) -> RoundOpen:
        named = set(self.layouts) | set(self.fresh_start) | set(self.carry_stored)
        stray = sorted(named - set(self.roster))
        if stray:
            named_by = "layouts, fresh starts or stored carried states name hotkeys"
            raise ValueError(f"{named_by} outside the roster: {stray[:3]}")
        for name, keys in (("fresh starts", self.fresh_start), ("stored", self.carry_stored)):
            if keys != sorted(set(keys)):
                raise ValueError(f"{name} must be sorted and name each hotkey once")
        if set(self.fresh_start) & set(self.carry_stored):
            raise ValueError("an island that starts fresh carries no stored state")
        return self

    def layout_of(self, hotkey: str, default: LayoutSpec) -> LayoutSpec:
        """The layout ``hotkey`` trains with this round (``default``: the manifest's)."""
        return self.layouts.get(hotkey, default)


class Commit(_Body):
    """An island's commitment for one round."""

    round: int = Field(ge=0)
    checkpoint_root: str = Field(pattern=_HEX64)
    leaf_count: int = Field(ge=2)
    update_sha256: str = Field(pattern=_HEX64)
    update_bytes: int = Field(ge=1)
    tokens: int = Field(ge=0)
    update_url: str = Field(max_length=1024)
    checkpoint_url: str = Field(default="", max_length=1024)
    train_loss: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)


class AuditAssignment(_Body):
    """Which island and which segments an auditor must replay."""

    round: int = Field(ge=0)
    hotkey: str = Field(pattern=_SS58)
    segments: list[int] = Field(max_length=4096)
    selection_beacon_round: int = Field(ge=0)


class Verdict(_Body):
    """An auditor's signed result for one assignment."""

    round: int = Field(ge=0)
    hotkey: str = Field(pattern=_SS58)
    segments: list[int] = Field(max_length=4096)
    result: Literal["match", "mismatch", "unverifiable"]  # unverifiable: the island's fault
    first_bad_leaf: int | None = Field(default=None, ge=0)
    update_checked: bool = False
    detail: str = Field(default="", max_length=2048)
    # Which check a mismatch failed: leaf 0 against the derived start state, a segment's
    # replay (``first_bad_leaf`` = its end leaf), or the update against the final state.
    check: Literal["start", "segment", "update"] | None = None


class MergeTape(_Body):
    """The aggregator's signed record of one merge (recomputable by anyone)."""

    round: int = Field(ge=0)
    start_model_sha256: str = Field(pattern=_HEX64)
    new_model_sha256: str = Field(pattern=_HEX64)
    new_model_url: str = Field(max_length=1024)
    outer_state_sha256: str = Field(pattern=_HEX64)
    tape_sha256: str = Field(pattern=_HEX64)
    eval_loss: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    # Settlement reads these: only ``included`` hotkeys can be paid for the round, and an
    # ``excluded`` reason the island authored (its blob missing or malformed) is a fault.
    included: list[str] = Field(default_factory=list, max_length=65536)
    excluded: dict[str, ExclusionReason] = Field(default_factory=dict, max_length=65536)
    # The start-model broadcast (protocol.md, "Start-model broadcast"): the merged outer
    # step, int8-encoded; an island holding ``start_model_sha256`` rebuilds the new model
    # from it and checks ``new_model_sha256``. Absent when the run publishes none.
    broadcast_sha256: str | None = Field(
        default=None, pattern=_HEX64, exclude_if=lambda v: v is None
    )
    broadcast_url: str | None = Field(default=None, max_length=1024, exclude_if=lambda v: v is None)
    broadcast_bytes: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)


class FaultRef(_Body):
    """A proven fault: the island and the round whose update it faults."""

    round: int = Field(ge=0)
    hotkey: str = Field(pattern=_SS58)


class MergeCorrection(_Body):
    """A corrected merge of a round that supersedes its current tape (a rollback).

    ``tape`` is the corrected round's record, in the ``merge-tape`` body's own form;
    ``supersedes_tape_sha256`` names the tape it replaces, and ``faults`` the proven
    faults the rebase answers (the round's own, or an earlier round's whose correction
    moved this round's start model).
    """

    supersedes_tape_sha256: str = Field(pattern=_HEX64)
    # empty only where it answers a contest: the superseded tape is contested by a witness
    faults: list[FaultRef] = Field(default_factory=list, max_length=4096)
    tape: MergeTape


class BlobPut(_Body):
    """Authorises a relay upload of a blob with a given hash and size."""

    sha256: str = Field(pattern=_HEX64)
    size: int = Field(ge=0)
    round: int = Field(ge=0)
    kind: Literal["update", "checkpoint", "model", "outer_state", "tape", "other"]


_ANSWER = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


class AdmissionAnswer(_Body):
    """A joining island's answers to its admission challenge: one workload hash per
    device, and per device the memory proof's answers (``QUERIES`` of them)."""

    seed_beacon_round: int = Field(ge=0)
    hashes: list[Annotated[str, Field(pattern=_HEX64)]] = Field(min_length=1, max_length=1024)
    memory: list[Annotated[list[_ANSWER], Field(min_length=1, max_length=64)]] = Field(
        min_length=1, max_length=1024
    )


class MemoryCheck(_Body):
    """One recomputed memory answer: device ``device``'s answer to query ``query``."""

    device: int = Field(ge=0, le=1023)
    query: int = Field(ge=0, le=63)
    answer: _ANSWER


# Why a worker refuses an island's answers without posting the whole sample:
# memory_mismatch: a sampled answer differs (the check stopped there); check_budget: the
# check would build more than the worker's budget; check_failed: computing the check on
# the island's bytes raised.
CheckRefusal = Literal["memory_mismatch", "check_budget", "check_failed"]


class AdmissionCheck(_Body):
    """A worker's reference hash and recomputed memory answers (exactly the sampled
    (device, query) pairs) for an island's admission challenge; or its typed refusal
    (``refusal``, with ``detail``), for which the answers it got to are enough."""

    hotkey: str = Field(pattern=_SS58)
    seed_beacon_round: int = Field(ge=0)
    reference_hash: str = Field(pattern=_HEX64)
    memory: list[MemoryCheck] = Field(default_factory=list, max_length=64)
    refusal: CheckRefusal | None = None
    detail: str = Field(default="", max_length=500)


class Leave(_Body):
    """An island announces that it leaves the run (it trains no round opened after this).

    Its escrow keeps vesting on the run's schedule and is still burned by a fault proven
    later (docs/mechanism.md, "Leaving"); a leave is final for the run."""

    reason: str = Field(default="", max_length=256)


class TapeAttestation(_Body):
    """A witness's word on a round's merge tape: it fetched the tape and the public
    blobs, recomputed the merge and compared it with the signed record (docs/mechanism.md,
    "Tape witnesses"). ``first_difference`` names the first differing field, exactly when
    the witness disagrees."""

    round: int = Field(ge=0)
    tape_sha256: str = Field(pattern=_HEX64)
    agrees: bool
    first_difference: str | None = Field(default=None, min_length=1, max_length=2048)

    @model_validator(mode="after")
    def _difference_iff_disagreeing(self) -> TapeAttestation:
        if self.agrees == (self.first_difference is not None):
            raise ValueError("first_difference is given exactly when the witness disagrees")
        return self


DOMAINS: dict[str, type[_Body]] = {
    "join": JoinRequest,
    "manifest": ManifestRecord,
    "round-open": RoundOpen,
    "commit": Commit,
    "audit-assignment": AuditAssignment,
    "verdict": Verdict,
    "merge-tape": MergeTape,
    "merge-correction": MergeCorrection,
    "tape-attestation": TapeAttestation,
    "blob-put": BlobPut,
    "admission-answer": AdmissionAnswer,
    "admission-check": AdmissionCheck,
    "leave": Leave,
}
