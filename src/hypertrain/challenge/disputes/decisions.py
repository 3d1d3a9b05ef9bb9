"""What a dispute game's state implies for the verdict it disputes and for its auditor.

The one rule, applied every time a game is stored (:func:`save`) or a re-audit arrives
on a decided game (:func:`reconsider`): a game waiting for re-audits (``recompute``) sets
its verdict aside; a lost bisection game sets the verdict aside too; an upheld game's
verdict counts again; a ``held`` game (no quorum, jurors found ``match``, none agreed)
holds the island's reward. An auditor is barred by one rule on every path
(:func:`~hypertrain.dispute.resolution.bars`): a referee's re-audit, or ``match``
re-audits from a strict majority of the game's jury (never fewer than two). A lost game
alone (a missed deadline, one contrary claim) bars nobody. An ``unverifiable`` verdict
counts against its auditor only through the re-audits received by the round's upload
deadline, which prove the bytes were served in time. Barring an auditor sets aside its
verdicts of every round not final yet (:func:`mark_faulty`). The caller holds the
transaction.
"""

from __future__ import annotations

import sqlite3

from hypertrain.challenge.store import (
    game_storage,
    reaudit_storage,
    rounds_storage,
    verdict_storage,
)
from hypertrain.dispute.model import Game
from hypertrain.dispute.resolution import bars, bars_auditor
from hypertrain.protocol.deadlines import upload_deadline


def save(
    conn: sqlite3.Connection,
    game: Game,
    now: int,
    nbytes: int = 0,
    referees: frozenset[str] = frozenset(),
) -> None:
    """Store a game's new state and what it implies (see the module's rule)."""
    game_storage.save_game(conn, game, now, nbytes)
    verdict_id = game_storage.disputed_verdict(conn, game.dispute_id)
    if game.stage == "recompute":  # waiting for the re-audit: the verdict does not count
        reaudit_storage.set_aside(conn, game, verdict_id, now)
    if game.outcome == "overturned" and game.check == "segment":
        reaudit_storage.set_aside(conn, game, verdict_id, now)
    if game.outcome == "upheld":  # a verdict set aside for a re-audit counts again
        reaudit_storage.restore(conn, game, verdict_id)
    reconsider(conn, game, now, referees)


def reconsider(
    conn: sqlite3.Connection, game: Game, now: int, referees: frozenset[str] = frozenset()
) -> None:
    """Bar the game's auditor if the evidence now meets the one barring rule."""
    if game.outcome != "overturned":
        return
    if game.stage == "decided" and game.check == "segment" and not game.reaudits:
        others = independent_verdicts(conn, game)  # a lost bisection game: the re-audits
        results = {v.auditor: v.result for v in others}
        by_referee = any(v.auditor in referees and v.result == "match" for v in others)
        if bars(game.jury, results, by_referee):
            mark_faulty(conn, game, now)
    elif bars_auditor(game, _timely(conn, game)):
        mark_faulty(conn, game, now)


def _timely(conn: sqlite3.Connection, game: Game) -> frozenset[str] | None:
    """The jurors whose ``match`` on the assignment came by its round's upload deadline."""
    span = rounds_storage.audit_span(conn, game.run_id, game.round)
    if game.check != "unverifiable" or span is None:
        return None
    selection, close = span
    deadline = upload_deadline(selection, close - selection)
    return frozenset(
        v.auditor
        for v in independent_verdicts(conn, game)
        if v.result == "match" and v.received_beacon_round <= deadline
    )


def independent_verdicts(
    conn: sqlite3.Connection, game: Game
) -> list[verdict_storage.VerdictRecord]:
    """The other auditors' verdicts on the disputed assignment, in order of arrival."""
    return verdict_storage.other_verdicts(conn, game.run_id, game.round, game.island, game.auditor)


def mark_faulty(conn: sqlite3.Connection, game: Game, now: int) -> None:
    """The evidence agrees the auditor was wrong: bar it, set its verdicts of rounds not
    final yet aside."""
    unfinal = verdict_storage.unfinal_verdicts_by(conn, game.run_id, game.auditor)
    reaudit_storage.mark_faulty(conn, game, now, unfinal)
