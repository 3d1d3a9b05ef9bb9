"""Typed errors for everything the trainer refuses.

All are ``ValueError`` subclasses so the top-level CLI prints them as ``error: ...``;
none of them is ever caught and ignored on a path that feeds a hash.
"""

from __future__ import annotations


class TrainerError(ValueError):
    """Base class: bad input to the trainer (config, samples, state)."""


class DeterminismError(TrainerError):
    """The local determinism record differs from the one the manifest demands."""


class CheckpointError(TrainerError):
    """A checkpoint or model blob is truncated, corrupt, or for another model."""


class CodecError(TrainerError):
    """An int8 update is malformed (wrong length, bad header, non-finite scale)."""


class SampleError(TrainerError):
    """Samples do not fit the step range, the sequence length or the vocabulary."""
