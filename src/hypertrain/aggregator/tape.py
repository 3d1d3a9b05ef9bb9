"""The merge tape: everything needed to recompute one merge, as canonical JSON.

The tape names the manifest (in full, so a verifier needs nothing else but blobs),
the start model and the previous outer state by hash, the round's reference norm
(``median_norm``), the inputs it came from (``history_norms``, ``proven``) and the clip
threshold, the earlier rounds' public updates it screened against exactly (``earlier``)
and every older public update of the run it screened against in the run sketch
(``older``, :mod:`hypertrain.aggregator.sketch`; both omitted when empty), the upload
deadline its availability was judged at (``updates_by_round``, omitted when absent), every
included update (hotkey, relay hash, verified tokens, exact norm, clip factor, weight)
in merge order, and every excluded one with a reason and
a ``stage``: ``collect`` exclusions (failed audit, bad commit) are policy inputs the
verifier takes as given, ``screen`` exclusions are recomputed from the blobs. The
outputs are the new outer-state and model hashes. Its address is the SHA-256 of
its canonical bytes; the signed ``MergeTape`` message body points to it.
"""

from __future__ import annotations

import hashlib
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hypertrain.aggregator.errors import TapeError
from hypertrain.protocol.canonical import canonical_bytes, parse_json
from hypertrain.protocol.exclusions import ExclusionReason
from hypertrain.protocol.manifest import RunManifest

TAPE_FORMAT: Final = "hypertrain-merge-tape/1"
_HEX64 = r"^[0-9a-f]{64}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Included(_Frozen):
    hotkey: str
    update_sha256: str = Field(pattern=_HEX64)
    tokens: int = Field(ge=1)
    norm: float = Field(ge=0)
    clip_factor: float = Field(gt=0, le=1)
    weight: float = Field(gt=0, le=1)


class Excluded(_Frozen):
    hotkey: str
    update_sha256: str
    tokens: int = Field(ge=0)
    stage: Literal["collect", "screen"]
    reason: ExclusionReason
    detail: str = Field(default="", max_length=2048)


class Candidate(_Frozen):
    """An update offered to the merge: a commit that passed collection."""

    hotkey: str
    update_sha256: str = Field(pattern=_HEX64)
    tokens: int = Field(ge=0)
    update_bytes: int = Field(ge=0)
    seq: int = Field(default=0, ge=0)  # commit arrival order in the round (earliest keeps a copy)


class Earlier(_Frozen):
    """A public update of an earlier round that the merge screens this round's against:
    a candidate explained by it is a copy, and a ``proven`` one sets the direction that
    decides what points against the round (:mod:`hypertrain.aggregator.aggregate`)."""

    round: int = Field(ge=0)
    hotkey: str
    update_sha256: str = Field(pattern=_HEX64)
    proven: bool = False


class Tape(_Frozen):
    format: Literal["hypertrain-merge-tape/1"] = TAPE_FORMAT
    run_id: str
    round: int = Field(ge=0)
    manifest: RunManifest
    manifest_digest: str
    start_model_sha256: str = Field(pattern=_HEX64)
    prev_outer_state_sha256: str | None = Field(default=None, pattern=_HEX64)
    median_norm: float = Field(ge=0)
    clip_threshold: float = Field(ge=0)
    total_tokens: int = Field(ge=0)
    included: list[Included]
    excluded: list[Excluded]
    candidates: list[Candidate]
    new_outer_state_sha256: str = Field(pattern=_HEX64)
    new_model_sha256: str = Field(pattern=_HEX64)
    rollback_of: str | None = Field(default=None, pattern=_HEX64)
    # inputs of the reference norm: trailing merged norms and the audit-proven hotkeys
    history_norms: list[float] = Field(default_factory=list)
    proven: list[str] = Field(default_factory=list)
    # earlier rounds' public updates (omitted when empty: such tapes keep their bytes)
    earlier: list[Earlier] = Field(default_factory=list, exclude_if=lambda v: not v)
    # every other public update of the run, screened in the run sketch (omitted when empty)
    older: list[Earlier] = Field(default_factory=list, exclude_if=lambda v: not v)
    # the upload deadline: an update counts only if the relay's arrival record shows it
    # by this beacon round (:mod:`hypertrain.aggregator.availability`; omitted when None)
    updates_by_round: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)

    def to_bytes(self) -> bytes:
        return canonical_bytes(self.model_dump(mode="json"))

    def sha256(self) -> str:
        return hashlib.sha256(self.to_bytes()).hexdigest()

    def settlement_exclusions(self) -> dict[str, ExclusionReason]:
        """hotkey -> reason for each excluded island not also included: what the signed
        ``merge-tape`` record names for settlement."""
        merged = {i.hotkey for i in self.included}
        out: dict[str, ExclusionReason] = {}
        for e in self.excluded:
            if e.hotkey not in merged:
                out.setdefault(e.hotkey, e.reason)
        return out


def decode_tape(data: bytes) -> Tape:
    """Parse a tape strictly; its manifest digest must match its manifest."""
    try:
        tape = Tape.model_validate(parse_json(data, max_bytes=64 << 20))
    except (ValidationError, ValueError) as exc:
        raise TapeError(f"not a valid merge tape: {str(exc).splitlines()[0]}") from None
    if tape.manifest.digest() != tape.manifest_digest:
        raise TapeError("the tape's manifest_digest does not match its manifest")
    if tape.manifest.run_id != tape.run_id:
        raise TapeError("the tape's run_id is not its manifest's")
    return tape
