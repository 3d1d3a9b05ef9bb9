"""Devnet errors: bad flags, a child that failed to start, a run that cannot finish."""

from __future__ import annotations


class DevnetError(ValueError):
    """The devnet cannot start or continue; the message says which part and why."""
