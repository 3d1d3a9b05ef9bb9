"""Signed message bodies and public views of competition mode, shared by both ends.

Domains: ``compete-commit`` (a miner's commitment), ``compete-reveal`` (the model's
file list and where to fetch it), ``compete-score`` (an evaluator's page losses) and
``competition`` (the coordinator-signed spec). Losses travel as the hex of
little-endian float32 bytes, so a score's bytes are exactly what the evaluator
computed and two evaluators with the same determinism record produce equal bytes.
"""

from __future__ import annotations

import struct

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import ModelFile
from hypertrain.protocol.domains import COMPETE_PAGES, tagged_hash
from hypertrain.protocol.merkle import MerkleProof

_HEX64 = r"^[0-9a-f]{64}$"
COMMIT_DOMAIN = "compete-commit"
REVEAL_DOMAIN = "compete-reveal"
SCORE_DOMAIN = "compete-score"
SPEC_DOMAIN = "competition"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CompeteCommit(_Body):
    commitment: str = Field(pattern=_HEX64)


class CompeteReveal(_Body):
    model_sha256: str = Field(pattern=_HEX64)
    files: list[ModelFile] = Field(min_length=2, max_length=64)
    base_url: str = Field(min_length=1, max_length=1024)  # relay serving /blobs/<sha256>


class CompeteScore(_Body):
    cycle: int = Field(ge=0, le=2**53 - 1)
    model_sha256: str = Field(pattern=_HEX64)
    pages_key: str = Field(pattern=_HEX64)
    losses_f32: str = Field(pattern=r"^([0-9a-f]{8})+$", max_length=8 * 65_536)
    determinism_sha256: str = Field(pattern=_HEX64)
    refused: str = Field(default="", max_length=1024)  # why the model was not evaluated

    @field_validator("losses_f32")
    @classmethod
    def _whole_floats(cls, value: str) -> str:
        if len(value) % 8:
            raise ValueError("losses_f32 must hold whole float32 values")
        return value

    def losses(self) -> tuple[float, ...]:
        return decode_losses(self.losses_f32)


def encode_losses(losses: list[float]) -> str:
    """Hex of little-endian float32 values."""
    return struct.pack(f"<{len(losses)}f", *losses).hex()


def decode_losses(text: str) -> tuple[float, ...]:
    raw = bytes.fromhex(text)
    return tuple(float(v) for v in struct.unpack(f"<{len(raw) // 4}f", raw))


class CompetitionCreated(_Body):
    competition_id: str
    spec_sha256: str
    start_beacon_round: int
    spec_envelope: dict[str, object]


class CompetitorPublic(_Body):
    hotkey: str
    commitment: str
    commit_beacon_round: int
    eligible_round: int
    model_sha256: str | None = None
    revealed: bool = False
    status: str  # committed | revealed | eligible | duplicate | refused | superseded
    detail: str = ""
    loss: float | None = None  # mean page loss in the latest scored cycle
    win_rate: float | None = None
    weight: float | None = None


class CycleModel(_Body):
    hotkey: str
    model_sha256: str
    commitment: str
    commit_beacon_round: int
    # the order the service accepted the commitment in (fixed at commit, never by a reveal)
    commit_seq: int = Field(ge=0)
    files: list[ModelFile]
    base_url: str


class PageProof(_Body):
    """A Merkle inclusion proof of one revealed pool page (see MerkleProof.to_json)."""

    index: int = Field(ge=0)
    leaf_count: int = Field(ge=1)
    siblings: list[str] = Field(max_length=64)

    def proof(self) -> MerkleProof:
        return MerkleProof.from_json(self.model_dump())


class RevealedPage(_Body):
    """One page of the secret pool, revealed when its cycle opens, with its proof."""

    position: int = Field(ge=0)
    tokens: str = Field(pattern=r"^([0-9a-f]{8})+$")  # little-endian uint32 hex
    proof: PageProof


class CycleTask(_Body):
    """What an evaluator scores in one cycle: pages of the held-out split and models."""

    competition_id: str
    cycle: int
    beacon_round: int
    randomness: str
    pages_key: str
    pages: list[int]  # positions in the secret pool, in evaluation order
    revealed: list[RevealedPage]  # the pages' tokens and proofs against pool_root
    score_deadline_round: int
    models: list[CycleModel]  # each hotkey's newest eligible commitment, oldest first
    # older models kept in the order (competition.references): scored like the models,
    # later commitments must beat them; a hotkey is paid for its newest model that counts
    references: list[CycleModel] = []
    scored: list[str] = []  # model hashes this evaluator already scored

    def listed(self) -> list[CycleModel]:
        """Every model to score: the models, then the references."""
        return [*self.models, *self.references]


class CycleResult(_Body):
    """One model's standing in a settled cycle (what the ledger was paid from)."""

    hotkey: str
    model_sha256: str
    mean_loss: float | None
    wins: int
    comparisons: int
    win_rate: float
    weight: float
    units: int
    counted: bool


class CycleRecord(_Body):
    """``GET /v1/competitions/<id>/cycles/<k>``: everything needed to recompute a cycle.

    The task (pages revealed with proofs, models with their commit round and
    acceptance order), every evaluator's signed score envelope and the stored standings;
    :func:`hypertrain.competition.replay.replay_cycle` recomputes the standings from
    the first two and must give the third.
    """

    competition_id: str
    cycle: int
    closed: bool
    task: CycleTask
    scores: list[dict[str, object]]  # compete-score envelopes, by evaluator then model
    results: list[CycleResult]


class CommitAccepted(_Body):
    """``POST /v1/compete/commit``: the commitment and the round it becomes eligible."""

    commitment: str
    hotkey: str
    commit_beacon_round: int
    eligible_round: int


class RevealAccepted(_Body):
    """``POST /v1/compete/reveal``: the file list hashed to the committed model hash."""

    commitment: str
    model_sha256: str
    revealed: bool


class ScoreAccepted(_Body):
    """``POST /worker/v1/compete/score``: an evaluator's page losses are stored."""

    accepted: bool
    cycle: int
    model_sha256: str


class Leaderboard(_Body):
    competition_id: str
    spec_sha256: str
    latest_cycle: int | None
    epsilon_now: float  # the leader's advantage at the current round (decayed by its age)
    competitors: list[CompetitorPublic]


def pages_key(spec: CompetitionSpec, cycle: int, randomness: str) -> str:
    """Hex key of a cycle's page permutation (bound to the competition and the cycle)."""
    data = spec.competition_id.encode() + b"\x00" + cycle.to_bytes(8, "big")
    return tagged_hash(COMPETE_PAGES, data + bytes.fromhex(randomness)).hex()
