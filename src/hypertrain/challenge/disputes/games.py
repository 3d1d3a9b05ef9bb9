"""The service side of disputes: open, answer, inputs, ruling, deadlines; no torch.

The game itself is :mod:`hypertrain.dispute.game`; this module checks what only the
service knows (the verdict, the commit's root and the dispute window, in
:mod:`~hypertrain.challenge.disputes.opening`; the bond, the manifest's referees), then
applies the transition and stores the new state, the accepted message and its size in
one transaction with the envelope's nonce. A refused message changes nothing. Opening
locks the bond in the ledger (its own journal entry) inside that transaction, refused
when the island cannot pay it (:mod:`~hypertrain.challenge.disputes.bonds`); once a game
is decided :func:`settle_bonds` returns or burns it. An overturned verdict marks its
auditor faulty and re-assigns its other verdicts of rounds not yet final
(:mod:`~hypertrain.challenge.disputes.decisions`). Every decision re-runs the island's
holds (:func:`~hypertrain.challenge.settlement.settle.release_later`), so a reward held for
the disputed verdict is released as soon as the rule allows. :func:`tick` applies
deadlines at each beacon round, so a game resumes from the database after a restart
exactly where it stopped.
"""

from __future__ import annotations

import logging
import sqlite3

from hypertrain.challenge.disputes import bonds, decisions, opening, windows
from hypertrain.challenge.errors import (
    BondMissingError,
    ChallengeError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PhaseError,
)
from hypertrain.challenge.facts import jury, roles
from hypertrain.challenge.metagraph import MetagraphView
from hypertrain.challenge.ports import Books, DueRound, LedgerPort
from hypertrain.challenge.settlement import settle
from hypertrain.challenge.state import ServiceState, quick_dumps
from hypertrain.challenge.store import game_storage, reaudit_storage
from hypertrain.dispute import game as g
from hypertrain.dispute import resolution
from hypertrain.dispute.errors import (
    DecidedError,
    DisputeError,
    DuplicateAnswerError,
    LateAnswerError,
    NotAPartyError,
    UnknownRefereeError,
)
from hypertrain.dispute.messages import DisputeAnswer, DisputeOpen, DisputeRuling
from hypertrain.dispute.narrowing import describe
from hypertrain.dispute.view import DisputeView
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.sqlite import transaction

log = logging.getLogger(__name__)
STAGES: tuple[str, ...] = ("step", "layer", "op", "referee", "recompute", "decided")


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
    verdict = opening.verdict_of(state.conn, run_id, body)
    if verdict.hotkey != hotkey:
        raise ForbiddenError("only the judged island may dispute a verdict", code="not_judged")
    if reaudit_storage.is_reassigned(state.conn, body.verdict_id):
        raise ChallengeError(
            "this verdict no longer counts (another auditor re-judges it)", code="reassigned"
        )
    manifest = state.manifest(run_id)
    try:
        check = opening.contested_check(verdict, body, manifest.round.num_segments)
    except DisputeError as exc:
        raise refusal(exc) from None
    row = opening.window_round(state.conn, manifest, run_id, body, verdict, now)
    opening.check_leaves(state.conn, run_id, body, hotkey)
    if game_storage.is_disputed(state.conn, body.verdict_id):
        raise ConflictError("this verdict is already disputed", code="duplicate")
    bond = bonds.dispute_bond(state.conn, state.ledger, run_id, hotkey, manifest.dispute.bond)
    game = opening.new_game(state, env, body, verdict.auditor, check, row.open_envelope, now)
    _store_open(state, env, game, body.verdict_id, bond, now)
    state.count("disputes_opened")
    log.info(
        "dispute %s (%s check) opened by %s against verdict %s",
        game.dispute_id[:16], check, hotkey, body.verdict_id[:16],
    )  # fmt: skip
    return _view(state.conn, game.dispute_id)


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
                _reaudits_known(state.conn, game, now, _referees(state.manifest(game.run_id)))
            if bond > 0:  # its own ledger entry; a refusal undoes the open
                state.ledger.lock_bond(
                    game.run_id, game.island, game.dispute_id, bond, _epoch(state.metagraph)
                )
    except sqlite3.IntegrityError:
        raise ConflictError("this verdict is already disputed", code="duplicate") from None


def _reaudits_known(
    conn: sqlite3.Connection, game: g.Game, now: int, referees: frozenset[str]
) -> g.Game:
    """A game that enters ``recompute`` counts the re-audits already stored (all of them,
    never only the first): a quorum of them, or a referee's, decides it at once."""
    new = game
    for v in decisions.independent_verdicts(conn, game):
        new = resolution.recomputed(new, v.auditor, v.result, now, referees)
    if new != game:
        decisions.save(conn, new, now, referees=referees)
    return new


def on_verdict(
    books: Books,
    manifest: RunManifest,
    run_id: str,
    index: int,
    hotkey: str,
    auditor: str,
    result: str,
) -> int:
    """An independent verdict on a disputed assignment: it re-decides or confirms.

    A ``recompute`` game counts it (a quorum of the run's other auditors, or one
    referee, decides). On a game the auditor lost it is evidence for the one barring
    rule (:mod:`~hypertrain.challenge.disputes.decisions`): the auditor is barred once a
    strict majority of the game's jury (at least two) or a referee re-audited ``match``;
    a ``mismatch`` here faults the island instead, through settlement. Returns how many
    games changed. ``manifest`` is the run's.
    """
    conn = books.conn
    now, changed = books.due_round(), 0
    windows.open_late_window(conn, manifest, run_id, index, hotkey, auditor, now)
    for game in game_storage.games_on(conn, run_id, index, hotkey):
        if auditor == game.auditor:
            continue
        referees = _referees(manifest)
        with transaction(conn):
            if game.stage == "recompute":
                new = resolution.recomputed(game, auditor, result, now, referees)
                decisions.save(conn, new, now, referees=referees)
                _log_progress(game, new)
                _rejudge(books, game, new)
                changed += 1
            elif game.outcome == "overturned":
                decisions.reconsider(conn, game, now, referees)
                changed += 1
    settle_bonds(conn, books.ledger, books.metagraph)
    return changed


def answer(state: ServiceState, dispute_id: str, env: Envelope) -> DisputeView:
    verified, body = state.open_signed(env, "dispute-answer", DisputeAnswer, registered=False)
    if body.dispute_id != dispute_id:
        raise ChallengeError("the answer names another dispute", code="wrong_query")
    game, now = _game(state.conn, dispute_id), state.due_round()
    try:
        new = g.answer(game, verified.signer, body, now)
    except DisputeError as exc:
        raise refusal(exc) from None
    with transaction(state.conn):
        state.burn(env)
        referees = _referees(state.manifest(game.run_id))
        decisions.save(state.conn, new, now, len(env.to_bytes()), referees)
        game_storage.record_message(
            state.conn, dispute_id, body.level, verified.signer, _text(env), now
        )
        if new.stage == "recompute":  # escalated: the traces could not tell who lied
            new = _reaudits_known(state.conn, new, now, referees)
    _log_progress(game, new)
    _rejudge(state.books(), game, new)
    settle_bonds(state.conn, state.ledger, state.metagraph)
    return _view(state.conn, dispute_id)


def put_inputs(
    conn: sqlite3.Connection, due_round: DueRound, dispute_id: str, data: bytes
) -> DisputeView:
    """The contested operation's inputs: anyone may upload them, the hashes decide."""
    game, now = _game(conn, dispute_id), due_round()
    if game.inputs_sha256 is not None:
        return _view(conn, dispute_id)  # already supplied; the bytes are fixed by the hashes
    try:
        new, sha = resolution.supply_inputs(game, data, now)
    except DisputeError as exc:
        raise refusal(exc) from None
    with transaction(conn):
        game_storage.add_inputs(conn, dispute_id, sha, data)
        decisions.save(conn, new, now, len(data))
        game_storage.record_message(
            conn, dispute_id, "inputs", "", quick_dumps({"sha256": sha}), now
        )
    return _view(conn, dispute_id)


def get_inputs(conn: sqlite3.Connection, dispute_id: str) -> bytes:
    data = game_storage.inputs(conn, dispute_id)
    if data is None:
        raise NotFoundError("no inputs were supplied for this dispute", code="no_inputs")
    return data


def ruling(state: ServiceState, dispute_id: str, env: Envelope) -> DisputeView:
    verified, body = state.open_signed(env, "dispute-ruling", DisputeRuling, registered=False)
    game, now = _game(state.conn, dispute_id), state.due_round()
    named = roles.named_roles(state.settings, state.manifest(game.run_id))
    referees = named.referees
    try:
        new = resolution.rule(game, verified.signer, body, referees, now)
    except DisputeError as exc:
        raise refusal(exc) from None
    roles.check(state.conn, named, game.run_id, verified.signer, "ruling")  # a referee only
    with transaction(state.conn):
        state.burn(env)
        decisions.save(state.conn, new, now, len(env.to_bytes()), referees)
        game_storage.record_message(
            state.conn, dispute_id, "ruling", verified.signer, _text(env), now
        )
    _log_progress(game, new)
    _rejudge(state.books(), game, new)
    settle_bonds(state.conn, state.ledger, state.metagraph)
    return _view(state.conn, dispute_id)


def tick(state: ServiceState) -> int:
    """Apply every due deadline; returns how many games changed."""
    if state.current is None:
        return 0
    now, changed = state.due_round(), 0
    for game in game_storage.undecided(state.conn):
        live = jury.live(state.conn, game.run_id, game.jury, now) if game.jury else None
        new = resolution.expire(game, now, live)
        if new != game:
            with transaction(state.conn):
                referees = _referees(state.manifest(game.run_id))
                decisions.save(state.conn, new, now, referees=referees)
            _log_progress(game, new)
            _rejudge(state.books(), game, new)
            changed += 1
    settle_bonds(state.conn, state.ledger, state.metagraph)
    windows.close_windows(state.conn, state.ledger, state.metagraph, now)
    return changed


def _rejudge(books: Books, old: g.Game, new: g.Game) -> None:
    """A game was decided: the disputed verdict's standing changed, so the island's
    rewards held for it are decided again (released where nothing else holds them)."""
    if new.outcome is not None and new.outcome != old.outcome:
        settle.release_later(books, new.run_id, new.round, new.island)


def settle_bonds(conn: sqlite3.Connection, ledger: LedgerPort, metagraph: MetagraphView) -> int:
    """Return the bond of each won dispute, burn that of each lost one (once each).

    The ledger call is idempotent per dispute, so a crash between it and the record
    here is settled again, to the same effect, at the next beacon round.
    """
    done = 0
    if metagraph.snapshot is None:
        return 0  # no epoch to book at: the bonds stay unsettled (bond_state NULL) till one
    for row in game_storage.unsettled_bonds(conn):
        won = row.outcome in ("overturned", "held")  # held: no evidence against the island
        try:
            moved = ledger.settle_bond(row.run_id, row.dispute_id, won, _epoch(metagraph))
        except BondMissingError as exc:  # recorded as such, never as returned or burned
            log.warning("dispute %s: %s", row.dispute_id[:16], exc.detail)
            game_storage.set_bond_state(conn, row.dispute_id, "missing")
            continue
        game_storage.set_bond_state(conn, row.dispute_id, "returned" if won else "burned")
        log.info(
            "dispute %s: bond of %d %s",
            row.dispute_id[:16],
            moved,
            "returned" if won else "burned",
        )
        done += 1
    return done


def _epoch(metagraph: MetagraphView) -> int:
    return metagraph.epoch_now("book a dispute bond")


def view(conn: sqlite3.Connection, dispute_id: str) -> DisputeView:
    return _view(conn, dispute_id)


MAX_ROUND = 2**62  # round indexes are SQLite integers; anything larger names no round


def listing(
    conn: sqlite3.Connection, run_id: str, round: int | None, stage: str | None
) -> list[DisputeView]:
    """The run's disputes (the caller checked that the run exists)."""
    if round is not None and not 0 <= round < MAX_ROUND:
        raise ChallengeError(f"round {round} is not a round index", code="bad_query")
    if stage is not None and stage not in STAGES:
        raise ChallengeError(f"stage {stage[:32]!r} is not one of {STAGES}", code="bad_query")
    return [_view(conn, i) for i in game_storage.list_ids(conn, run_id, round, stage)]


def _referees(manifest: RunManifest) -> frozenset[str]:
    """The run's referees (``manifest``: the run of the game)."""
    return frozenset(manifest.dispute.referees)


def _game(conn: sqlite3.Connection, dispute_id: str) -> g.Game:
    game = game_storage.load_game(conn, dispute_id)
    if game is None:
        raise NotFoundError(f"dispute {dispute_id[:16]} does not exist", code="unknown_dispute")
    return game


def _view(conn: sqlite3.Connection, dispute_id: str) -> DisputeView:
    found = game_storage.load_view(conn, dispute_id)
    if found is None:
        raise NotFoundError(f"dispute {dispute_id[:16]} does not exist", code="unknown_dispute")
    return found


def _text(env: Envelope) -> str:
    return env.to_bytes().decode("utf-8")


def _log_progress(old: g.Game, new: g.Game) -> None:
    for step in new.steps[len(old.steps) :]:
        log.info("dispute %s at beacon %d: %s", new.dispute_id[:16], step.beacon_round,
                 describe(step))  # fmt: skip
