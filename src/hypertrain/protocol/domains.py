"""Every domain-separation tag in the system, named once.

A tagged hash is ``SHA-256(tag || 0x00 || data)``. Tags are ASCII and never contain
NUL, so the encoding is prefix-free: no two (tag, data) pairs share hash input bytes.
Adding a domain means adding a constant here and a line in docs/protocol.md.
"""

from __future__ import annotations

import hashlib
from typing import Final

PREFIX: Final = "hypertrain/v1/"

# Merkle trees (RFC 6962 style: a leaf can never pass for an interior node).
MERKLE_LEAF: Final = b"hypertrain/v1/merkle-leaf"
MERKLE_NODE: Final = b"hypertrain/v1/merkle-node"
MERKLE_EMPTY: Final = b"hypertrain/v1/merkle-empty"

# Signed envelopes: the signature covers ENVELOPE_SIG || 0x00 || canonical bytes.
ENVELOPE_SIG: Final = b"hypertrain/v1/envelope"

# Content hashes of protocol artifacts.
SAMPLE: Final = b"hypertrain/v1/sample"
STATE: Final = b"hypertrain/v1/state"
UPDATE: Final = b"hypertrain/v1/update"
MANIFEST: Final = b"hypertrain/v1/manifest"
ASSIGNMENT_KEY: Final = b"hypertrain/v1/assignment-key"
# The key of the warm start's sample order (run id and seed, before any round exists).
WARM_START_KEY: Final = b"hypertrain/v1/warm-start-key"
AUDIT_SELECTION: Final = b"hypertrain/v1/audit-selection"
JOURNAL_ENTRY: Final = b"hypertrain/v1/journal-entry"
SELFCHECK: Final = b"hypertrain/v1/selfcheck"
# The admission memory proof: device seeds, answers and the worker's check sample.
MEMPROOF: Final = b"hypertrain/v1/memproof"
LOCAL_BEACON_GROUP: Final = b"hypertrain/v1/local-beacon-group"
PERMUTATION: Final = b"hypertrain/v1/permutation"
# Competition mode: the spec, a submitted model directory, its commitment, the pages.
COMPETITION_SPEC: Final = b"hypertrain/v1/competition-spec"
COMPETE_MODEL: Final = b"hypertrain/v1/compete-model"
COMPETE_COMMITMENT: Final = b"hypertrain/v1/compete-commitment"
COMPETE_PAGES: Final = b"hypertrain/v1/compete-pages"

ALL_DOMAINS: Final = (
    MERKLE_LEAF,
    MERKLE_NODE,
    MERKLE_EMPTY,
    ENVELOPE_SIG,
    SAMPLE,
    STATE,
    UPDATE,
    MANIFEST,
    ASSIGNMENT_KEY,
    WARM_START_KEY,
    AUDIT_SELECTION,
    JOURNAL_ENTRY,
    SELFCHECK,
    MEMPROOF,
    PERMUTATION,
    LOCAL_BEACON_GROUP,
    COMPETITION_SPEC,
    COMPETE_MODEL,
    COMPETE_COMMITMENT,
    COMPETE_PAGES,
)


def tagged_prefix(tag: bytes) -> bytes:
    """The bytes every message hashed under ``tag`` starts with."""
    if b"\x00" in tag or not tag.startswith(PREFIX.encode()):
        raise ValueError(f"invalid domain tag {tag!r}")
    return tag + b"\x00"


def tagged_hash(tag: bytes, data: bytes) -> bytes:
    """SHA-256 of ``tag || 0x00 || data`` (32 bytes)."""
    return hashlib.sha256(tagged_prefix(tag) + data).digest()


def tagged_hasher(tag: bytes) -> hashlib._Hash:
    """A streaming SHA-256 already fed with the tag prefix, for large inputs."""
    return hashlib.sha256(tagged_prefix(tag))
