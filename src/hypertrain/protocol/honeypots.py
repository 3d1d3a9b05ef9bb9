"""The operator's honeypot list and its commitment (committed in the manifest, revealed later).

The list names each honeypot hotkey, its role (``island`` or ``auditor``) and its
strategy (``honest`` or a cheat), plus a random ``salt`` so the commitment cannot be
brute-forced from the roster. The manifest carries ``honeypots.commitment`` =
``SHA-256(JCS(list))`` (hex) and ``honeypots.reveal_round``; once that round is final
the operator publishes the list and anyone checks it against the commitment.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hypertrain.protocol.canonical import canonical_bytes


class HoneypotEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hotkey: str = Field(min_length=40, max_length=60)
    role: Literal["island", "auditor"]
    strategy: str = Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")  # "honest" or a cheat's name


class HoneypotList(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    salt: str = Field(pattern=r"^[0-9a-f]{64}$")
    entries: list[HoneypotEntry] = Field(max_length=4096)


def commitment(honeypots: HoneypotList) -> str:
    """Hex SHA-256 of the list's canonical JSON: what the manifest commits to."""
    return hashlib.sha256(canonical_bytes(honeypots.model_dump(mode="json"))).hexdigest()
