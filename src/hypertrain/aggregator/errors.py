"""Typed errors of the aggregator; each is a ``ValueError`` so the CLI prints it cleanly."""

from __future__ import annotations


class AggregatorError(ValueError):
    """Base class: the merge could not be done or verified."""


class BlobError(AggregatorError):
    """A blob is missing, has the wrong hash or the wrong size."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class UpdateFormatError(AggregatorError):
    """An update does not decode for this model (``reason`` is its screen code)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class TapeError(AggregatorError):
    """A tape is malformed, or it does not match the merge recomputed from its blobs."""


class GenesisError(AggregatorError):
    """Round 0's start model cannot be published: a warm start without its model, or a
    model that does not fit the run."""


class ChainMovedError(AggregatorError):
    """A round's current tape is not the one the rounds list named (a correction landed
    between the two reads): a view of the chain that mixes them is torn."""
