"""Why a merge left a commit out: the one list of reason codes the merge tape may carry.

The aggregator writes these into the signed merge tape and the service's settlement
reads them back, so both import the :data:`ExclusionReason` literal from here: a code
that is not on this list fails validation on both sides instead of turning, silently,
into "unpaid". A new screen adds its code here. No code is a fault by itself: a fault is
proven by an audit verdict, which its island can dispute, never by the tape's word, so an
exclusion only leaves the island unpaid for the round (or, for the audit codes below,
held until the verdict decides).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

ExclusionReason = Literal[
    # collection: the commit itself
    "bad_commit",
    "wrong_round",
    "audit_mismatch",
    "audit_pending",
    "stale_update",
    "duplicate",
    "rolled_back",
    # the blob on the relay
    "missing_blob",
    "hash_mismatch",
    "too_large",
    "no_key",
    # decoding the update
    "wrong_size",
    "wrong_shape",
    "non_finite",
    "malformed",
    "tokens_out_of_range",
    # robust screens
    "zero_norm",
    "no_reference",
    "norm_outlier",
    "duplicate_update",
    "near_duplicate",  # explained by earlier updates: a copy, rescaled, noisy or combined
    "against_aggregate",  # points against the geometric median of the others
]

EXCLUSION_REASONS: Final[frozenset[str]] = frozenset(get_args(ExclusionReason))

# The codes a tape may give at its ``collect`` stage: each one is a fact of the public
# round record (a signed commit, a verdict, an assignment, an earlier tape, a proven
# fault a correction cites), which a witness checks against that record. Every other code
# is a screen's, which the witness recomputes from the updates themselves; a tape that
# gives one at the collect stage (where a verifier takes exclusions as inputs) is contested.
COLLECT_REASONS: Final[frozenset[ExclusionReason]] = frozenset(
    {"bad_commit", "wrong_round", "audit_mismatch", "audit_pending", "stale_update", "duplicate",
     "rolled_back"}
)  # fmt: skip

# The exclusion for an island with a non-``match`` verdict at merge time; when a dispute
# later overturns every such verdict the work was honest, only too late to merge: paid.
AUDIT_EXCLUSION: Final[ExclusionReason] = "audit_mismatch"
# Both audit exclusions: ``audit_pending`` is an assigned audit without a verifiable
# verdict at merge time; its reward is held until a verdict exists, like a disputed one.
AUDIT_EXCLUSIONS: Final[frozenset[ExclusionReason]] = frozenset({"audit_mismatch", "audit_pending"})
