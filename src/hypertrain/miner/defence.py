"""The island's defence: every fault-bearing verdict on it, by the dispute admitted for it.

A ``mismatch`` names the first check it failed, and an ``unverifiable`` says the
island's bytes were withheld or unreadable (docs/mechanism.md, Disputes). The island
answers each with the one dispute the service admits for it, and only when its own
local check refutes the verdict:

=================================  =================================================  ===========
verdict                            local check that refutes it                        dispute
=================================  =================================================  ===========
segment ``k`` (leaf ``k + 1``)     its replay of segment ``k`` reproduces leaf k + 1  bisection
``start`` (leaf 0)                 its derived start state hashes to its leaf 0       recompute
``update``                         its final checkpoint re-encodes to its update      recompute
``unverifiable``                   its index and every checkpoint the audit selected  recompute
                                   are at the relay under their committed hashes
=================================  =================================================  ===========

A verdict the local check confirms is not disputed (the dispute would be lost, with
its bond). Either way the decision is one structured ``defence`` event (:class:`Defence`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from hypertrain.api.errors import ServiceError
from hypertrain.dispute.admissible import failed_check
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.index import MAX_INDEX_BYTES, CheckpointIndex, sha_from_url
from hypertrain.miner.checkpoints import checkpoints_to_upload
from hypertrain.miner.context import RunContext
from hypertrain.miner.disputes import open_dispute, stored_leaves
from hypertrain.miner.errors import MinerError
from hypertrain.miner.recompute import Recomputation, Recompute
from hypertrain.miner.report import Reporter
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.merkle import MerkleTree
from hypertrain.protocol.messages import Commit, Verdict
from hypertrain.relay.client import RelayClient
from hypertrain.relay.errors import RelayError
from hypertrain.trainer.errors import TrainerError

Contested = Literal["start", "segment", "update", "unverifiable"]
Action = Literal["dispute", "accept", "refused"]  # refused: refuted, the opening refused
Reason = Literal[
    "refuted",  # the local check refutes the verdict: disputed
    "already_disputed",
    "not_disputable",  # the verdict names nothing a dispute can contest
    "no_commit",
    "leaves_unavailable",  # neither stored checkpoints nor the relay's index prove them
    "local_check_failed",
    "start_differs",  # the island's own start state is not its leaf 0: the verdict is right
    "replay_differs",
    "update_differs",
    "withheld",  # the island's bytes really are not at the relay
    "opening_refused",
]
# What a local check may raise: each means "not refuted here", never a dispute.
LOCAL_FAILURES = (MinerError, OSError, RelayError, ServiceError, TrainerError, VerificationError)


@dataclass(frozen=True, slots=True)
class Target:
    """What a dispute of a verdict contests: its check, on which audited segment."""

    check: Contested
    segment: int
    audited: tuple[int, ...]  # every segment the verdict judged


@dataclass(frozen=True, slots=True)
class Defence:
    """The island's decision on one verdict (what the ``defence`` event reports)."""

    verdict_id: str
    round: int
    check: Contested | None  # None: the verdict names nothing a dispute can contest
    segment: int | None
    action: Action
    reason: Reason  # why: the local check's finding
    detail: str = ""  # what it found, for people (a missing blob, a refusal's code, an error)
    dispute_id: str | None = None


def target(body: Verdict, num_segments: int) -> Target | None:
    """The check and segment the service admits a dispute of ``body`` on (None: none)."""
    segments = sorted(set(body.segments))
    if body.result == "match" or not segments:
        return None
    audited = tuple(segments)
    if body.result == "unverifiable":
        return Target("unverifiable", segments[0], audited)  # any audited segment
    if body.first_bad_leaf is None:  # a mismatch naming no leaf: nothing is admissible
        return None
    check = failed_check(
        check=body.check,
        first_bad_leaf=body.first_bad_leaf,
        update_checked=body.update_checked,
        num_segments=num_segments,
    )
    if check == "segment":
        segment = body.first_bad_leaf - 1
        return Target("segment", segment, audited) if segment in segments else None
    if check == "update":
        last = num_segments - 1 if num_segments - 1 in segments else segments[-1]
        return Target("update", last, audited)
    return Target("start", segments[0], audited)


def relay_index(relay: RelayClient, commit: Commit) -> CheckpointIndex | str:
    """The island's checkpoint index as the relay serves it, or why it is not served."""
    sha = sha_from_url(commit.checkpoint_url)
    if relay.exists(sha) is None:
        return "index not at the relay"
    index = CheckpointIndex.from_bytes(
        relay.get(sha, max_bytes=MAX_INDEX_BYTES), leaf_count=commit.leaf_count
    )
    leaves = [bytes.fromhex(h) for h in index.leaves]
    if index.round != commit.round or MerkleTree.from_leaves(leaves).root_hex != (
        commit.checkpoint_root
    ):
        return "index is not the committed one"
    return index


def withheld(relay: RelayClient, commit: Commit, segments: list[int]) -> str | None:
    """What an audit of ``segments`` could not fetch at the relay now; None: all served."""
    index = relay_index(relay, commit)
    if isinstance(index, str):
        return index
    for k in checkpoints_to_upload(segments):
        if relay.exists(index.blobs[k]) is None:
            return f"checkpoint {k} not at the relay"
    return None


def committed_leaves(ctx: RunContext, relay: RelayClient, commit: Commit) -> list[bytes] | None:
    """The committed leaves: from the stored checkpoints, else the relay's index."""
    root = commit.checkpoint_root
    try:
        leaves = stored_leaves(ctx, commit.round, commit.leaf_count)
        if MerkleTree.from_leaves(leaves).root_hex == root:
            return leaves
    except OSError:
        pass  # pruned or never stored here: the index at the relay proves the leaves too
    index = relay_index(relay, commit)
    return None if isinstance(index, str) else [bytes.fromhex(h) for h in index.leaves]


def refutes(
    aim: Target, commit: Commit, leaves: list[bytes], relay: RelayClient, recompute: Recompute
) -> tuple[Reason, str] | None:
    """None when the island's local check refutes the verdict; else what it found."""
    index = commit.round
    if aim.check == "unverifiable":
        missing = withheld(relay, commit, list(aim.audited))
        return None if missing is None else ("withheld", missing)
    if aim.check == "start":
        same = recompute.start_hash(index) == leaves[0]
        return None if same else ("start_differs", "own start state is not leaf 0")
    if aim.check == "update":
        same = recompute.update_sha256(index, leaves[-1]) == commit.update_sha256
        return None if same else ("update_differs", "own final state is not the update")
    end = recompute.segment_end(index, aim.segment)
    same = end == leaves[aim.segment + 1]
    return None if same else ("replay_differs", f"own replay does not reach leaf {aim.segment + 1}")


def defend(
    ctx: RunContext,
    key: Hotkey,
    relay: RelayClient,
    verdict_id: str,
    body: Verdict,
    reporter: Reporter,
    recompute: Recompute | None = None,
) -> Defence:
    """Dispute ``body`` by its admitted dispute when the local check refutes it; report."""
    decision = _decide(
        ctx, key, relay, verdict_id, body, recompute or Recomputation(ctx, key, relay)
    )
    reporter.event(
        "defence",
        round=decision.round,
        verdict_id=verdict_id[:16],
        check=decision.check,
        segment=decision.segment,
        action=decision.action,
        reason=decision.reason,
        detail=decision.detail,
        dispute_id=decision.dispute_id[:16] if decision.dispute_id else None,
    )
    if decision.reason == "refuted" and decision.dispute_id is not None:
        reporter.event(
            "dispute_opened",
            round=decision.round,
            segment=decision.segment,
            dispute_id=decision.dispute_id[:16],
        )
    return decision


def _decide(
    ctx: RunContext,
    key: Hotkey,
    relay: RelayClient,
    verdict_id: str,
    body: Verdict,
    recompute: Recompute,
) -> Defence:
    aim = target(body, ctx.manifest.round.num_segments)
    if aim is None:
        return Defence(verdict_id, body.round, None, None, "accept", "not_disputable")
    base = Defence(verdict_id, body.round, aim.check, aim.segment, "accept", "refuted")
    known = _existing_dispute(ctx, key, verdict_id)
    if known is not None:
        return replace(base, action="dispute", reason="already_disputed", dispute_id=known)
    commit = _own_commit(ctx, key, body.round)
    if commit is None:
        return replace(base, reason="no_commit")
    try:
        missing = (
            withheld(relay, commit, list(aim.audited)) if aim.check == "unverifiable" else None
        )
        if missing is not None:  # checked first: without the index no leaf is proven either
            return replace(base, reason="withheld", detail=missing)
        leaves = committed_leaves(ctx, relay, commit)
        if leaves is None:
            return replace(base, reason="leaves_unavailable")
        finding = refutes(aim, commit, leaves, relay, recompute)
    except LOCAL_FAILURES as exc:
        failed = f"{type(exc).__name__}: {exc}"[:512]
        return replace(base, reason="local_check_failed", detail=failed)
    if finding is not None:
        return replace(base, reason=finding[0], detail=finding[1])
    opened = open_dispute(ctx, key, verdict_id, body.round, aim.segment, leaves)
    if opened.dispute_id is None:
        return replace(
            base, action="refused", reason="opening_refused", detail=opened.refusal or ""
        )
    return replace(base, action="dispute", dispute_id=opened.dispute_id)


def _own_commit(ctx: RunContext, key: Hotkey, index: int) -> Commit | None:
    detail = ctx.service.round_detail(ctx.manifest.run_id, index)
    raw = next((c for c in detail.commits if c.signer == key.ss58_address), None)
    return Commit.model_validate(raw.body) if raw is not None else None


def _existing_dispute(ctx: RunContext, key: Hotkey, verdict_id: str) -> str | None:
    for view in ctx.service.disputes(ctx.manifest.run_id):
        if view.verdict_id == verdict_id and view.hotkey == key.ss58_address:
            return view.dispute_id
    return None
