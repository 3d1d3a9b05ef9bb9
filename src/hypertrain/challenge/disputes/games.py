"""The service side of disputes: open, answer, inputs, ruling, deadlines; no torch.

The game itself is :mod:`hypertrain.dispute.game`; this module checks what only the
service knows (the verdict, the commit's root, the dispute window, the bond, the
manifest's referees), then applies the transition and stores the new state, the
accepted message and its size in one transaction with the envelope's nonce. A
refused message changes nothing. Opening locks the bond in the ledger (its own
journal entry) inside that transaction, refused when the island cannot pay it
(:mod:`~hypertrain.challenge.disputes.bonds`); once a game is decided :func:`settle_bonds`
returns or burns it. An overturned verdict marks its auditor faulty and re-assigns
its other verdicts of rounds not yet final (:mod:`~hypertrain.challenge.disputes.decisions`).
Every decision re-runs the island's holds
(:func:`~hypertrain.challenge.rounds.settle.release_later`), so a reward held for the
disputed verdict is released as soon as the rule allows.
:func:`tick` applies deadlines at each beacon round, so a game resumes from the
database after a restart exactly where it stopped.
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3

from hypertrain.challenge.disputes import bonds, decisions, game_storage, reaudit_storage, windows
from hypertrain.challenge.errors import (
    BondMissingError,
    ChallengeError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PhaseError,
)
from hypertrain.challenge.rounds import commit_storage, jury, roles, settle, verdict_storage
from hypertrain.challenge.rounds import storage as rounds_storage
from hypertrain.challenge.rounds.storage import RoundState
from hypertrain.challenge.rounds.verdict_storage import VerdictRecord
from hypertrain.challenge.state import ServiceState, loads, quick_dumps
from hypertrain.dispute import game as g
from hypertrain.dispute import resolution
from hypertrain.dispute.admissible import disputed_check
from hypertrain.dispute.errors import (
    DecidedError,
    DisputeError,
    DuplicateAnswerError,
    LateAnswerError,
    NotAPartyError,
    UnknownRefereeError,
)
from hypertrain.dispute.messages import DisputeAnswer, DisputeOpen, DisputeRuling, LeafProof
from hypertrain.dispute.narrowing import describe
from hypertrain.dispute.view import DisputeView
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.errors import MerkleError
from hypertrain.protocol.manifest import DisputeSpec
from hypertrain.protocol.merkle import MerkleProof, verify_proof
from hypertrain.protocol.messages import Verdict
from hypertrain.protocol.sqlite import transaction

log = logging.getLogger(__name__)
STAGES: tuple[str, ...] = ("step", "layer", "op", "referee", "recompute", "decided")
# checks no bisection can narrow: an independent re-audit re-decides them
RECOMPUTED: dict[str, resolution.Check] = {
    "start": "start",
    "update": "update",
    "unverifiable": "unverifiable",
}


def refusal(exc: DisputeError) -> ChallengeError:
    """The HTTP form of a game refusal (the code is the error's own)."""
    if isinstance(exc, NotAPartyError | UnknownRefereeError):
        return ForbiddenError(str(exc), code=exc.code)
    if isinstance(exc, LateAnswerError):
        return PhaseError(str(exc), code=exc.code)
    if isinstance(exc, DuplicateAnswerError | DecidedError):
        return ConflictError(str(exc), code=exc.code)
    return ChallengeError(str(exc), code=exc.code)


def open_dispute(state: ServiceState, env: Envelope) -> DisputeView:
    verified, body = state.open_signed(env, "dispute-open", DisputeOpen, registered=True)
    run_id, hotkey, now = env.run_id, verified.signer, state.due_round()
    verdict = _verdict(state, run_id, body)
    if verdict.hotkey != hotkey:
        raise ForbiddenError("only the judged island may dispute a verdict", code="not_judged")
    if reaudit_storage.is_reassigned(state.conn, body.verdict_id):
        raise ChallengeError(
            "this verdict no longer counts (another auditor re-judges it)", code="reassigned"
        )
    manifest = state.manifest(run_id)
    check = _contested_check(verdict, body, manifest.round.num_segments)
    row = _open_window(state, run_id, body, verdict, now)
    _check_leaves(state, run_id, body, hotkey)
    if game_storage.is_disputed(state.conn, body.verdict_id):
        raise ConflictError("this verdict is already disputed", code="duplicate")
    bond = bonds.dispute_bond(state.conn, state.ledger, run_id, hotkey, manifest.dispute.bond)
    game = _new_game(state, env, body, verdict.auditor, check, row.open_envelope, now)
    _store_open(state, env, game, body.verdict_id, bond, now)
    state.count("disputes_opened")
    log.info(
        "dispute %s (%s check) opened by %s against verdict %s",
        game.dispute_id[:16], check, hotkey, body.verdict_id[:16],
    )  # fmt: skip
    return _view(state, game.dispute_id)


def _contested_check(verdict: VerdictRecord, body: DisputeOpen, num_segments: int) -> str:
    """What a dispute of this verdict contests: every fault-bearing verdict is contestable.

    A ``mismatch`` is contested on the check it names as first failing
    (:func:`~hypertrain.dispute.admissible.disputed_check`); an ``unverifiable`` verdict
    (the island says its bytes were served) is re-decided by an independent re-audit.
    """
    if verdict.result not in windows.FAULT_RESULTS:
        raise ChallengeError("a match verdict is no fault: nothing to dispute", code="not_mismatch")
    judged = Verdict.model_validate(loads(verdict.body))
    if body.segment not in judged.segments:
        raise ChallengeError(f"segment {body.segment} was not audited", code="bad_segment")
    if verdict.result == "unverifiable":
        return "unverifiable"
    try:
        return disputed_check(
            check=judged.check,
            first_bad_leaf=judged.first_bad_leaf,
            update_checked=judged.update_checked,
            num_segments=num_segments,
            segment=body.segment,
        )
    except DisputeError as exc:
        raise refusal(exc) from None


def _open_window(
    state: ServiceState, run_id: str, body: DisputeOpen, verdict: VerdictRecord, now: int
) -> RoundState:
    """The round's state, once the verdict's own dispute window is checked to be open."""
    row = rounds_storage.round_state(state.conn, run_id, body.round)
    assert row is not None  # the verdict's round
    deadline = windows.verdict_deadline(state, run_id, row.dispute_deadline_round, verdict)
    if deadline is None or now > deadline:
        raise PhaseError(
            f"the dispute window of verdict {body.verdict_id[:16]} closed at beacon round"
            f" {deadline}",
            code="late",
        )
    return row


def _rules(spec: DisputeSpec) -> g.Rules:
    return g.Rules(
        fanout=spec.fanout,
        answer_rounds=spec.answer_rounds,
        referee_rounds=spec.referee_rounds,
        clock_rounds=spec.clock_rounds,
        referee_extensions=spec.referee_extensions,
    )


def _new_game(
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
    dispute_id = hashlib.sha256(env.to_bytes()).hexdigest()
    common = {"dispute_id": dispute_id, "run_id": run_id, "round": body.round}
    common |= {"segment": body.segment, "island": hotkey, "auditor": auditor}
    if check in RECOMPUTED:
        return resolution.open_recompute(
            **common,  # type: ignore[arg-type]
            check=RECOMPUTED[check],
            rules=_rules(manifest.dispute),
            now=now,
            jury=jury.jury(state, run_id, (auditor, hotkey)),
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
    jurors = jury.jury(state, run_id, (auditor, hotkey))
    return game.model_copy(update={"jury": jurors})  # for a game escalated to a re-audit


def _store_open(
    state: ServiceState, env: Envelope, game: g.Game, verdict_id: str, bond: int, now: int
) -> None:
    try:
        with transaction(state.conn):
            state.burn(env)
            game_storage.insert_game(state.conn, game, verdict_id, bond, now)
            decisions.save(state.conn, game, now, len(env.to_bytes()))
            game_storage.record_message(
                state.conn, game.dispute_id, "open", game.island, _text(env), now
            )
            if game.stage == "recompute":  # the verdict waits for a quorum of re-audits
                reaudit_storage.set_aside(state.conn, game, verdict_id, now)
                _reaudits_known(state, game, now)
            if bond > 0:  # its own ledger entry; a refusal undoes the open
                state.ledger.lock_bond(
                    game.run_id, game.island, game.dispute_id, bond, _epoch(state)
                )
    except sqlite3.IntegrityError:
        raise ConflictError("this verdict is already disputed", code="duplicate") from None


def _reaudits_known(state: ServiceState, game: g.Game, now: int) -> g.Game:
    """A game that enters ``recompute`` counts the re-audits already stored (all of them,
    never only the first): a quorum of them, or a referee's, decides it at once."""
    new = game
    for v in decisions.independent_verdicts(state.conn, game):
        new = resolution.recomputed(new, v.auditor, v.result, now, _referees(state, game))
    if new != game:
        decisions.save(state.conn, new, now, referees=_referees(state, game))
    return new


def on_verdict(
    state: ServiceState, run_id: str, index: int, hotkey: str, auditor: str, result: str
) -> int:
    """An independent verdict on a disputed assignment: it re-decides or confirms.

    A ``recompute`` game counts it (a quorum of the run's other auditors, or one
    referee, decides). On a game the auditor lost it is evidence for the one barring
    rule (:mod:`~hypertrain.challenge.disputes.decisions`): the auditor is barred once a
    strict majority of the game's jury (at least two) or a referee re-audited ``match``;
    a ``mismatch`` here faults the island instead, through settlement. Returns how many
    games changed.
    """
    now, changed = state.due_round(), 0
    windows.open_late_window(state, run_id, index, hotkey, auditor, now)
    for game in game_storage.games_on(state.conn, run_id, index, hotkey):
        if auditor == game.auditor:
            continue
        referees = _referees(state, game)
        with transaction(state.conn):
            if game.stage == "recompute":
                new = resolution.recomputed(game, auditor, result, now, referees)
                decisions.save(state.conn, new, now, referees=referees)
                _log_progress(game, new)
                _rejudge(state, game, new)
                changed += 1
            elif game.outcome == "overturned":
                decisions.reconsider(state.conn, game, now, referees)
                changed += 1
    settle_bonds(state)
    return changed


def answer(state: ServiceState, dispute_id: str, env: Envelope) -> DisputeView:
    verified, body = state.open_signed(env, "dispute-answer", DisputeAnswer, registered=False)
    if body.dispute_id != dispute_id:
        raise ChallengeError("the answer names another dispute", code="wrong_query")
    game, now = _game(state, dispute_id), state.due_round()
    try:
        new = g.answer(game, verified.signer, body, now)
    except DisputeError as exc:
        raise refusal(exc) from None
    with transaction(state.conn):
        state.burn(env)
        decisions.save(state.conn, new, now, len(env.to_bytes()), _referees(state, game))
        game_storage.record_message(
            state.conn, dispute_id, body.level, verified.signer, _text(env), now
        )
        if new.stage == "recompute":  # escalated: the traces could not tell who lied
            new = _reaudits_known(state, new, now)
    _log_progress(game, new)
    _rejudge(state, game, new)
    settle_bonds(state)
    return _view(state, dispute_id)


def put_inputs(state: ServiceState, dispute_id: str, data: bytes) -> DisputeView:
    """The contested operation's inputs: anyone may upload them, the hashes decide."""
    game, now = _game(state, dispute_id), state.due_round()
    if game.inputs_sha256 is not None:
        return _view(state, dispute_id)  # already supplied; the bytes are fixed by the hashes
    try:
        new, sha = resolution.supply_inputs(game, data, now)
    except DisputeError as exc:
        raise refusal(exc) from None
    with transaction(state.conn):
        game_storage.add_inputs(state.conn, dispute_id, sha, data)
        decisions.save(state.conn, new, now, len(data))
        game_storage.record_message(
            state.conn, dispute_id, "inputs", "", quick_dumps({"sha256": sha}), now
        )
    return _view(state, dispute_id)


def get_inputs(state: ServiceState, dispute_id: str) -> bytes:
    data = game_storage.inputs(state.conn, dispute_id)
    if data is None:
        raise NotFoundError("no inputs were supplied for this dispute", code="no_inputs")
    return data


def ruling(state: ServiceState, dispute_id: str, env: Envelope) -> DisputeView:
    verified, body = state.open_signed(env, "dispute-ruling", DisputeRuling, registered=False)
    game, now = _game(state, dispute_id), state.due_round()
    referees = frozenset(state.manifest(game.run_id).dispute.referees)
    try:
        new = resolution.rule(game, verified.signer, body, referees, now)
    except DisputeError as exc:
        raise refusal(exc) from None
    roles.check(state, game.run_id, verified.signer, "ruling")  # a referee of no other role
    with transaction(state.conn):
        state.burn(env)
        decisions.save(state.conn, new, now, len(env.to_bytes()), referees)
        game_storage.record_message(
            state.conn, dispute_id, "ruling", verified.signer, _text(env), now
        )
    _log_progress(game, new)
    _rejudge(state, game, new)
    settle_bonds(state)
    return _view(state, dispute_id)


def tick(state: ServiceState) -> int:
    """Apply every due deadline; returns how many games changed."""
    if state.current is None:
        return 0
    now, changed = state.due_round(), 0
    for game in game_storage.undecided(state.conn):
        live = jury.live(state, game.run_id, game.jury, now) if game.jury else None
        new = resolution.expire(game, now, live)
        if new != game:
            with transaction(state.conn):
                decisions.save(state.conn, new, now, referees=_referees(state, game))
            _log_progress(game, new)
            _rejudge(state, game, new)
            changed += 1
    settle_bonds(state)
    windows.close_windows(state, now)
    return changed


def _rejudge(state: ServiceState, old: g.Game, new: g.Game) -> None:
    """A game was decided: the disputed verdict's standing changed, so the island's
    rewards held for it are decided again (released where nothing else holds them)."""
    if new.outcome is not None and new.outcome != old.outcome:
        settle.release_later(state, new.run_id, new.round, new.island)


def settle_bonds(state: ServiceState) -> int:
    """Return the bond of each won dispute, burn that of each lost one (once each).

    The ledger call is idempotent per dispute, so a crash between it and the record
    here is settled again, to the same effect, at the next beacon round.
    """
    done = 0
    if state.metagraph.snapshot is None:
        return 0  # no epoch to book at: the bonds stay unsettled (bond_state NULL) till one
    for row in game_storage.unsettled_bonds(state.conn):
        won = row.outcome in ("overturned", "held")  # held: no evidence against the island
        try:
            moved = state.ledger.settle_bond(row.run_id, row.dispute_id, won, _epoch(state))
        except BondMissingError as exc:  # recorded as such, never as returned or burned
            log.warning("dispute %s: %s", row.dispute_id[:16], exc.detail)
            game_storage.set_bond_state(state.conn, row.dispute_id, "missing")
            continue
        game_storage.set_bond_state(state.conn, row.dispute_id, "returned" if won else "burned")
        log.info(
            "dispute %s: bond of %d %s",
            row.dispute_id[:16],
            moved,
            "returned" if won else "burned",
        )
        done += 1
    return done


def _epoch(state: ServiceState) -> int:
    return state.epoch_now("book a dispute bond")


def view(state: ServiceState, dispute_id: str) -> DisputeView:
    return _view(state, dispute_id)


MAX_ROUND = 2**62  # round indexes are SQLite integers; anything larger names no round


def listing(
    state: ServiceState, run_id: str, round: int | None, stage: str | None
) -> list[DisputeView]:
    state.manifest(run_id)
    if round is not None and not 0 <= round < MAX_ROUND:
        raise ChallengeError(f"round {round} is not a round index", code="bad_query")
    if stage is not None and stage not in STAGES:
        raise ChallengeError(f"stage {stage[:32]!r} is not one of {STAGES}", code="bad_query")
    return [_view(state, i) for i in game_storage.list_ids(state.conn, run_id, round, stage)]


def _verdict(state: ServiceState, run_id: str, body: DisputeOpen) -> VerdictRecord:
    row = verdict_storage.verdict_record(state.conn, run_id, body.round, body.verdict_id)
    if row is None:
        raise NotFoundError(
            f"verdict {body.verdict_id[:16]} not found in round {body.round}",
            code="unknown_verdict",
        )
    return row


def _check_leaves(state: ServiceState, run_id: str, body: DisputeOpen, hotkey: str) -> None:
    commit = commit_storage.commit_body(state.conn, run_id, body.round, hotkey)
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


def _referees(state: ServiceState, game: g.Game) -> frozenset[str]:
    return frozenset(state.manifest(game.run_id).dispute.referees)


def _game(state: ServiceState, dispute_id: str) -> g.Game:
    game = game_storage.load_game(state.conn, dispute_id)
    if game is None:
        raise NotFoundError(f"dispute {dispute_id[:16]} does not exist", code="unknown_dispute")
    return game


def _view(state: ServiceState, dispute_id: str) -> DisputeView:
    found = game_storage.load_view(state.conn, dispute_id)
    if found is None:
        raise NotFoundError(f"dispute {dispute_id[:16]} does not exist", code="unknown_dispute")
    return found


def _text(env: Envelope) -> str:
    return env.to_bytes().decode("utf-8")


def _log_progress(old: g.Game, new: g.Game) -> None:
    for step in new.steps[len(old.steps) :]:
        log.info("dispute %s at beacon %d: %s", new.dispute_id[:16], step.beacon_round,
                 describe(step))  # fmt: skip
