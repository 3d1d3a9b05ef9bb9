"""What opening a dispute checks, and the game it opens (the service side; no torch).

An island may dispute a verdict on its own audit that faults it, while the verdict's
dispute window is open, on an audited segment whose two leaves it proves against its
commit's checkpoint root; the check the verdict names as first failing decides what is
contested. The game opened is a bisection over the segment
(:func:`hypertrain.dispute.game.open_game`), or, for a check no bisection can narrow, a
re-decision by independent re-audits (:func:`hypertrain.dispute.resolution.open_recompute`).
:mod:`.games` stores it.
"""

from __future__ import annotations

import sqlite3

from hypertrain.challenge.disputes import windows
from hypertrain.challenge.errors import ChallengeError, NotFoundError, PhaseError
from hypertrain.challenge.facts import jury
from hypertrain.challenge.state import ServiceState, loads
from hypertrain.challenge.store import commit_storage, rounds_storage, verdict_storage
from hypertrain.challenge.store.rounds_storage import RoundState
from hypertrain.challenge.store.verdict_storage import VerdictRecord
from hypertrain.dispute import game as g
from hypertrain.dispute import resolution
from hypertrain.dispute.admissible import disputed_check
from hypertrain.dispute.messages import DisputeOpen, LeafProof
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.errors import MerkleError
from hypertrain.protocol.manifest import DisputeSpec, RunManifest
from hypertrain.protocol.merkle import MerkleProof, verify_proof
from hypertrain.protocol.messages import Verdict

# checks no bisection can narrow: an independent re-audit re-decides them
RECOMPUTED: dict[str, resolution.Check] = {
    "start": "start",
    "update": "update",
    "unverifiable": "unverifiable",
}


def verdict_of(conn: sqlite3.Connection, run_id: str, body: DisputeOpen) -> VerdictRecord:
    """The disputed verdict, from the round the dispute names (``unknown_verdict``: none)."""
    row = verdict_storage.verdict_record(conn, run_id, body.round, body.verdict_id)
    if row is None:
        raise NotFoundError(
            f"verdict {body.verdict_id[:16]} not found in round {body.round}",
            code="unknown_verdict",
        )
    return row


def contested_check(verdict: VerdictRecord, body: DisputeOpen, num_segments: int) -> str:
    """What a dispute of this verdict contests: every fault-bearing verdict is contestable.

    A ``mismatch`` is contested on the check it names as first failing
    (:func:`~hypertrain.dispute.admissible.disputed_check`); an ``unverifiable`` verdict
    (the island says its bytes were served) is re-decided by an independent re-audit. A
    check no dispute may contest raises the game's own
    :class:`~hypertrain.dispute.errors.DisputeError`.
    """
    if verdict.result not in windows.FAULT_RESULTS:
        raise ChallengeError("a match verdict is no fault: nothing to dispute", code="not_mismatch")
    judged = Verdict.model_validate(loads(verdict.body))
    if body.segment not in judged.segments:
        raise ChallengeError(f"segment {body.segment} was not audited", code="bad_segment")
    if verdict.result == "unverifiable":
        return "unverifiable"
    return disputed_check(
        check=judged.check,
        first_bad_leaf=judged.first_bad_leaf,
        update_checked=judged.update_checked,
        num_segments=num_segments,
        segment=body.segment,
    )


def window_round(
    conn: sqlite3.Connection,
    manifest: RunManifest,
    run_id: str,
    body: DisputeOpen,
    verdict: VerdictRecord,
    now: int,
) -> RoundState:
    """The round's state, once the verdict's own dispute window is checked to be open
    (``manifest``: the run's)."""
    row = rounds_storage.round_state(conn, run_id, body.round)
    assert row is not None  # the verdict's round
    deadline = windows.verdict_deadline(manifest, row.dispute_deadline_round, verdict)
    if deadline is None or now > deadline:
        raise PhaseError(
            f"the dispute window of verdict {body.verdict_id[:16]} closed at beacon round"
            f" {deadline}",
            code="late",
        )
    return row


def check_leaves(conn: sqlite3.Connection, run_id: str, body: DisputeOpen, hotkey: str) -> None:
    commit = commit_storage.commit_body(conn, run_id, body.round, hotkey)
    assert commit is not None  # its verdict judged this commit
    root = bytes.fromhex(loads(commit)["checkpoint_root"])
    for index, leaf in ((body.segment, body.start), (body.segment + 1, body.end)):
        _check_leaf(root, index, leaf)


def _check_leaf(root: bytes, index: int, leaf: LeafProof) -> None:
    try:
        proof = MerkleProof.from_json(leaf.proof)
        if proof.index != index:
            raise MerkleError(f"the proof is for leaf {proof.index}, not {index}")
        verify_proof(root, bytes.fromhex(leaf.leaf), proof)
    except MerkleError as exc:
        raise ChallengeError(f"leaf {index}: {exc}", code="bad_proof") from None


def _rules(spec: DisputeSpec) -> g.Rules:
    return g.Rules(
        fanout=spec.fanout,
        answer_rounds=spec.answer_rounds,
        referee_rounds=spec.referee_rounds,
        clock_rounds=spec.clock_rounds,
        referee_extensions=spec.referee_extensions,
    )


def new_game(
    state: ServiceState,
    env: Envelope,
    body: DisputeOpen,
    auditor: str,
    check: str,
    open_envelope: str,
    now: int,
) -> g.Game:
    """A bisection game on the first differing segment, or a re-decision by recomputation."""
    run_id, hotkey = env.run_id, env.signer
    manifest = state.manifest(run_id)
    dispute_id = env.content_id()
    common = {"dispute_id": dispute_id, "run_id": run_id, "round": body.round}
    common |= {"segment": body.segment, "island": hotkey, "auditor": auditor}
    if check in RECOMPUTED:
        return resolution.open_recompute(
            **common,  # type: ignore[arg-type]
            check=RECOMPUTED[check],
            rules=_rules(manifest.dispute),
            now=now,
            jury=jury.jury(state.conn, state.settings, run_id, (auditor, hotkey)),
        )
    layout = state.layout_of(run_id, body.round, open_envelope, hotkey)
    game = g.open_game(
        **common,  # type: ignore[arg-type]
        interval=manifest.round.checkpoint_interval,
        sections=g.section_names(manifest.model.num_layers, layout.dp_ranks * layout.micro_batches),
        start_hash=body.start.leaf,
        island_end=body.end.leaf,
        rules=_rules(manifest.dispute),
        now=now,
    )
    jurors = jury.jury(state.conn, state.settings, run_id, (auditor, hotkey))
    return game.model_copy(update={"jury": jurors})  # for a game escalated to a re-audit
