"""Typed errors for everything the data layer refuses.

Each is a :class:`DataError` (a ``ValueError``), so the top-level CLI prints it as
``error: ...``; callers that must tell cases apart catch the subclass.
"""

from __future__ import annotations


class DataError(ValueError):
    """Base class: bad corpus, dataset, proof or assignment input."""


class TokenizerError(DataError):
    """A tokenizer file is malformed, lacks the end-of-document token, or cannot be trained."""


class TokenizerMismatchError(TokenizerError):
    """A tokenizer file's SHA-256 differs from the pinned hash."""


class CorpusError(DataError):
    """A corpus file cannot be read as documents (format, encoding, structure)."""


class MissingTextColumnError(CorpusError):
    """A JSON-lines record or Parquet file has no ``text`` field/column."""


class EncodingError(CorpusError):
    """A corpus file holds bytes that are not valid UTF-8."""


class EmptyDocumentError(CorpusError):
    """An empty document was found and the policy is to refuse rather than count it."""


class DescriptorError(DataError):
    """A dataset descriptor is malformed or disagrees with the files beside it."""


class ShardIntegrityError(DataError):
    """A shard's (or the sample-hash file's) bytes no longer match the recorded hash."""


class SampleRangeError(DataError):
    """A sample id is outside ``[0, sample_count)``."""


class SampleProofError(DataError):
    """A sample does not verify against a dataset root with the given proof."""


class AssignmentError(DataError):
    """A roster, permutation domain or assignment state is invalid."""
