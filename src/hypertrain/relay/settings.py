"""Relay configuration: one typed, frozen value, built by the CLI or by tests.

Unknown fields are refused. ``state_dir`` holds the relay's own small databases
(replay store, upload accounting) and the spool for remote storage; it must be a
local directory even when blobs live in object storage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hypertrain.relay.clock import QUICKNET_GENESIS_UNIX, QUICKNET_PERIOD_S

GIB: Final = 1 << 30


class RelaySettings(BaseModel):
    """Everything a relay process needs to know."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    storage: str = Field(min_length=1, description="directory, or fsspec URL such as s3://b/p")
    state_dir: Path
    run_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    # more runs (and competitions) served beside run_id; none of either: any run
    run_ids: frozenset[str] = frozenset()

    @property
    def served_runs(self) -> frozenset[str]:
        """The runs whose uploads are accepted; empty means every run."""
        return self.run_ids | ({self.run_id} if self.run_id else set())

    upstream: str | None = Field(default=None, pattern=r"^https?://")
    allow_list: Path | None = None
    metagraph_url: str | None = Field(default=None, pattern=r"^https?://")
    metagraph_refresh_s: float = Field(default=60.0, gt=0)
    coordinators: frozenset[str] = frozenset()
    max_blob_bytes: int = Field(default=GIB, ge=1)
    max_round_bytes: int = Field(default=4 * GIB, ge=1)
    # uploads per hotkey are counted per window of this many beacon rounds (relay clock)
    quota_window_rounds: int = Field(default=100, ge=1)
    max_lifetime_rounds: int = Field(default=1200, ge=1)
    beacon_genesis_unix: int = QUICKNET_GENESIS_UNIX
    beacon_period_s: int = Field(default=QUICKNET_PERIOD_S, ge=1)
    upstream_timeout_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _one_registry(self) -> RelaySettings:
        if self.allow_list is not None and self.metagraph_url is not None:
            raise ValueError("give an allow-list file or a metagraph URL, not both")
        return self
