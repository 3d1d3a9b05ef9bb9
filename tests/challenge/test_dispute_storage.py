"""The dispute tables' rule over the service's typed rows, on a real migrated database.

The dispute storage (``store.game_storage`` and its parts) reads none of the rounds
tables: the service passes it the verdicts it needs (``store.verdict_storage``), and
``disputes.decisions`` says what a stored game implies. These hold that split to the
rule: a faulty auditor's verdicts of rounds not final are set aside (never the disputed
one, never a final round's), a ``recompute`` game keeps its verdict aside until it is
upheld, and only a fault verdict gets a late dispute window.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hypertrain.challenge import database
from hypertrain.challenge.disputes import decisions
from hypertrain.challenge.store import (
    game_storage,
    reaudit_storage,
    rounds_storage,
    verdict_storage,
    window_storage,
)
from hypertrain.dispute import game as g
from hypertrain.dispute import resolution

RUN = "run-1"
AUDITOR, ISLAND, OTHER = "auditor-a", "island-i", "island-j"


@pytest.fixture
def conn(tmp_path: Path) -> sqlite3.Connection:
    conn = database.connect(tmp_path)
    rounds_storage.add_run(conn, RUN, "{}", "{}", "digest")
    for index, phase in ((0, "audit"), (1, "final"), (2, "audit")):
        conn.execute(
            "INSERT INTO rounds (run_id, round, phase, open_beacon_round, randomness,"
            " assignment_key, commit_deadline, start_model_sha256, start_model_url,"
            " open_envelope, dispute_deadline_round) VALUES (?, ?, ?, 1, 'r', 'k', 2, 's',"
            " 'u', '{}', 9)",
            (RUN, index, phase),
        )
    return conn


def _verdict(conn: sqlite3.Connection, vid: str, index: int, hotkey: str, result: str) -> None:
    conn.execute(
        "INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, '{}', '{}', 3)",
        (vid, RUN, index, hotkey, AUDITOR, result),
    )


def _recompute_game(conn: sqlite3.Connection, verdict_id: str) -> g.Game:
    game = resolution.open_recompute(
        dispute_id="d-1", run_id=RUN, round=0, segment=0, island=ISLAND, auditor=AUDITOR,
        check="start", rules=g.Rules(), now=4,
    )  # fmt: skip
    game_storage.insert_game(conn, game, verdict_id, 0, 4)
    return game


def _aside(conn: sqlite3.Connection) -> set[str]:
    return {x.verdict_id for x in reaudit_storage.set_aside_verdicts(conn, RUN)}


def test_a_faulty_auditors_unfinal_verdicts_are_set_aside_but_not_the_disputed_one(
    conn: sqlite3.Connection,
) -> None:
    _verdict(conn, "v-disputed", 0, ISLAND, "mismatch")
    _verdict(conn, "v-same-round", 0, OTHER, "match")
    _verdict(conn, "v-final-round", 1, ISLAND, "match")
    _verdict(conn, "v-later-round", 2, OTHER, "mismatch")
    game = _recompute_game(conn, "v-disputed")
    decisions.mark_faulty(conn, game, 5)
    assert reaudit_storage.is_faulty(conn, RUN, AUDITOR)
    assert _aside(conn) == {"v-same-round", "v-later-round"}


def test_a_recompute_game_keeps_its_verdict_aside_until_it_is_upheld(
    conn: sqlite3.Connection,
) -> None:
    _verdict(conn, "v-disputed", 0, ISLAND, "mismatch")
    game = _recompute_game(conn, "v-disputed")
    decisions.save(conn, game, 4)
    assert [(x.verdict_id, x.recompute) for x in reaudit_storage.set_aside_verdicts(conn, RUN)] == [
        ("v-disputed", True)
    ]
    upheld = game.model_copy(update={"stage": "decided", "outcome": "upheld"})
    decisions.save(conn, upheld, 6)
    assert _aside(conn) == set()
    assert not reaudit_storage.is_faulty(conn, RUN, AUDITOR)


def test_only_a_fault_verdict_gets_a_late_window(conn: sqlite3.Connection) -> None:
    _verdict(conn, "v-match", 2, ISLAND, "match")
    _verdict(conn, "v-fault", 2, OTHER, "unverifiable")
    for hotkey in (ISLAND, OTHER):
        record = verdict_storage.verdict_by(conn, RUN, 2, hotkey, AUDITOR)
        assert record is not None
        window_storage.open_window(conn, record, 20, books_fault=False)
    assert [w.verdict_id for w in window_storage.due_windows(conn, 21)] == ["v-fault"]
    assert game_storage.disputes_open(conn, RUN, 2)
