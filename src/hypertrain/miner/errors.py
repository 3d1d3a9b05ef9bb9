"""Typed errors of the miner client."""

from __future__ import annotations


class MinerError(ValueError):
    """A miner operation that cannot proceed (bad config, refused record, wrong phase)."""


class ConfigError(MinerError):
    """miner.toml or a flag is missing, malformed or inconsistent."""
