"""The operator's honeypot lists and their commitments, one list per period of rounds.

A list names each honeypot hotkey, its role (``island`` or ``auditor``) and its
strategy (``honest`` or a cheat), plus a random ``salt`` so the commitment cannot be
brute-forced from the roster. An island that is honest for a while and then cheats may
say from which round it cheats (``cheats_from_round``), so the catch rate counts only
the rounds it cheated; left out, the entry hashes exactly as it did before the field
existed, and a cheating entry is taken to cheat in every round of its period. The
commitment is ``SHA-256(JCS(list))`` (hex). The manifest's ``honeypots.commitment``
covers period 0 (rounds 0 to ``honeypots.reveal_round``); each later period
(:class:`HoneypotPeriod`) is committed to the service before its first round opens. Once
a period's last round is final the operator publishes its list and anyone checks it
against that period's commitment.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hypertrain.protocol.canonical import canonical_bytes


class HoneypotEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hotkey: str = Field(min_length=40, max_length=60)
    role: Literal["island", "auditor"]
    strategy: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")  # "honest" or a cheat's name
    # the first round it cheats (honest before); absent: every round, and out of the hash
    cheats_from_round: int | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _cheats_only_as_a_cheat(self) -> HoneypotEntry:
        if self.cheats_from_round is not None and (
            self.role != "island" or self.strategy == "honest"
        ):
            raise ValueError("cheats_from_round belongs to an island entry with a cheat")
        return self


class HoneypotList(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    salt: str = Field(pattern=r"^[0-9a-f]{64}$")
    entries: list[HoneypotEntry] = Field(max_length=4096)


def commitment(honeypots: HoneypotList) -> str:
    """Hex SHA-256 of the list's canonical JSON: what the manifest commits to."""
    return hashlib.sha256(canonical_bytes(honeypots.model_dump(mode="json"))).hexdigest()


class HoneypotPeriod(BaseModel):
    """The commitment to one period's list: rounds ``first_round`` to ``last_round``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    period: int = Field(ge=0, le=1_000_000)
    first_round: int = Field(ge=0)
    last_round: int = Field(ge=0)
    commitment: str = Field(pattern=r"^[0-9a-f]{64}$")

    @model_validator(mode="after")
    def _rounds_in_order(self) -> HoneypotPeriod:
        if self.last_round < self.first_round:
            raise ValueError(
                f"last_round {self.last_round} is before first_round {self.first_round}"
            )
        return self
