"""What a dispute game's state implies for the verdict it disputes and for its auditor.

The one rule, applied every time a game is stored (:func:`save`): a game waiting for
re-audits (``recompute``) sets its verdict aside; a lost bisection game sets the verdict
aside too, and bars its auditor only once an independent re-audit agrees with the island
(every other verdict on the assignment is ``match``); a ``recompute`` game that a quorum
of re-audits or a referee overturned bars the auditor at once
(:func:`~hypertrain.dispute.resolution.bars_auditor`); an upheld game's verdict counts
again. Barring an auditor sets aside its verdicts of every round not final yet
(:func:`mark_faulty`). The caller holds the transaction.
"""

from __future__ import annotations

import sqlite3

from hypertrain.challenge.rounds import storage as rounds_storage
from hypertrain.dispute import store
from hypertrain.dispute.game import Game
from hypertrain.dispute.resolution import bars_auditor


def save(conn: sqlite3.Connection, game: Game, now: int, nbytes: int = 0) -> None:
    """Store a game's new state and what it implies (see the module's rule)."""
    store.save_game(conn, game, now, nbytes)
    verdict_id = store.disputed_verdict(conn, game.dispute_id)
    if game.stage == "recompute":  # waiting for the re-audit: the verdict does not count
        store.set_aside(conn, game, verdict_id, now)
    if game.outcome == "overturned" and game.check == "segment":
        store.set_aside(conn, game, verdict_id, now)
        others = [v.result for v in independent_verdicts(conn, game)]
        agreed = not game.reaudits or bars_auditor(game)  # an escalated game: as a recompute
        if others and all(r == "match" for r in others) and agreed:  # a re-audit agrees
            mark_faulty(conn, game, now)
    elif bars_auditor(game):  # a quorum's or a referee's re-audit, never an availability one
        mark_faulty(conn, game, now)
    elif game.outcome == "upheld":  # a verdict set aside for a re-audit counts again
        store.restore(conn, game, verdict_id)


def independent_verdicts(
    conn: sqlite3.Connection, game: Game
) -> list[rounds_storage.VerdictRecord]:
    """The other auditors' verdicts on the disputed assignment, in order of arrival."""
    return rounds_storage.other_verdicts(conn, game.run_id, game.round, game.island, game.auditor)


def mark_faulty(conn: sqlite3.Connection, game: Game, now: int) -> None:
    """An independent re-audit agrees the auditor was wrong: bar it, set its verdicts of
    rounds not final yet aside."""
    unfinal = rounds_storage.unfinal_verdicts_by(conn, game.run_id, game.auditor)
    store.mark_faulty(conn, game, now, unfinal)
