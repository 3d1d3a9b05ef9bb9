"""Storage of a run's record: runs, rounds, roster, commits, audits, verdicts, merges,
settlements and the beacon rounds that chose the audits.

This module owns those tables: the SQL that reads them for the public views, the
dashboard, the traffic count and the clock, and that opens, moves and settles rounds,
lives here and returns typed rows, so a caller never indexes a database row by a
string. Its parts hold the rest of the same tables' SQL, by concern: the roster
(:mod:`.roster_storage`), commits (:mod:`.commit_storage`), audits and verdicts with
the standing of each verdict (:mod:`.verdict_storage`), merge tapes, their corrections
and proven faults (:mod:`.merge_storage`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass

from hypertrain.api.models import Phase


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    manifest_digest: str


@dataclass(frozen=True, slots=True)
class RoundRow:
    """One round with its counts: commits, tokens, update bytes, audits, and its merge."""

    round: int
    phase: Phase
    open_beacon_round: int
    commit_deadline: int
    selection_beacon_round: int | None
    audit_close_round: int | None
    dispute_deadline_round: int | None
    start_model_sha256: str | None
    new_model_sha256: str | None
    eval_loss: float | None
    commits: int
    tokens: int
    update_bytes: int
    audits: int
    settled_epoch: int | None


@dataclass(frozen=True, slots=True)
class CommitTokens:
    round: int
    hotkey: str
    tokens: int
    train_loss: float | None


@dataclass(frozen=True, slots=True)
class BeaconRow:
    round: int
    randomness: str
    signature: str


@dataclass(frozen=True, slots=True)
class RosterRow:
    """An admitted island with its commits and the run's last round."""

    hotkey: str
    first_round: int
    probation_until_round: int
    device_class: str
    num_devices: int
    commits: int
    tokens: int
    last_round: int | None
    left_round: int | None  # the first round opened without it, once it left
    proven_memory_bytes: int  # what its admission challenge proved (0: not proven)


@dataclass(frozen=True, slots=True)
class AuditRow:
    """An audit assignment with the beacon round (and randomness) that selected it."""

    round: int
    hotkey: str
    segments: str  # JSON list of segment indices
    probation: bool
    selection_beacon_round: int | None
    randomness: str | None


@dataclass(frozen=True, slots=True)
class VerdictRow:
    verdict_id: str
    auditor: str
    result: str
    body: str  # the verdict body as stored (JSON)


@dataclass(frozen=True, slots=True)
class RoundTiming:
    """Beacon rounds of a round's opening, its last accepted commit and its merge tape."""

    opened: int
    last_commit: int | None
    merged: int | None


def runs(conn: sqlite3.Connection) -> list[RunRow]:
    rows = conn.execute("SELECT run_id, manifest_digest FROM runs ORDER BY run_id")
    return [RunRow(r["run_id"], r["manifest_digest"]) for r in rows]


def manifest_json(conn: sqlite3.Connection, run_id: str) -> str | None:
    row = conn.execute("SELECT manifest_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else str(row["manifest_json"])


def manifest_envelope(conn: sqlite3.Connection, run_id: str) -> str | None:
    row = conn.execute("SELECT manifest_envelope FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else str(row["manifest_envelope"])


def rounds(conn: sqlite3.Connection, run_id: str) -> list[RoundRow]:
    """Every round of a run, in order, with its counts and its merge."""
    rows = conn.execute(
        """
        SELECT r.*,
          (SELECT COUNT(*) FROM commits c WHERE c.run_id = r.run_id AND c.round = r.round) AS n,
          (SELECT COALESCE(SUM(tokens), 0) FROM commits c
             WHERE c.run_id = r.run_id AND c.round = r.round) AS tokens,
          (SELECT COALESCE(SUM(update_bytes), 0) FROM commits c
             WHERE c.run_id = r.run_id AND c.round = r.round) AS update_bytes,
          (SELECT COUNT(*) FROM audits a WHERE a.run_id = r.run_id AND a.round = r.round)
             AS audits,
          m.new_model_sha256, m.eval_loss
        FROM rounds r LEFT JOIN merges m ON m.run_id = r.run_id AND m.round = r.round
        WHERE r.run_id = ? ORDER BY r.round
        """,
        (run_id,),
    )
    return [
        RoundRow(
            round=r["round"],
            phase=r["phase"],
            open_beacon_round=r["open_beacon_round"],
            commit_deadline=r["commit_deadline"],
            selection_beacon_round=r["selection_beacon_round"],
            audit_close_round=r["audit_close_round"],
            dispute_deadline_round=r["dispute_deadline_round"],
            start_model_sha256=r["start_model_sha256"],
            new_model_sha256=r["new_model_sha256"],
            eval_loss=r["eval_loss"],
            commits=r["n"],
            tokens=r["tokens"],
            update_bytes=r["update_bytes"],
            audits=r["audits"],
            settled_epoch=r["settled_epoch"],
        )
        for r in rows
    ]


def commit_tokens(conn: sqlite3.Connection, run_id: str) -> list[CommitTokens]:
    """Every commit's round, island, tokens and self-reported loss, by round."""
    rows = conn.execute(
        "SELECT round, hotkey, tokens, train_loss FROM commits WHERE run_id = ? ORDER BY round",
        (run_id,),
    )
    return [CommitTokens(r["round"], r["hotkey"], r["tokens"], r["train_loss"]) for r in rows]


def open_envelope(conn: sqlite3.Connection, run_id: str, index: int) -> str | None:
    row = conn.execute(
        "SELECT open_envelope FROM rounds WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    return None if row is None else str(row["open_envelope"])


def commit_envelopes(conn: sqlite3.Connection, run_id: str, index: int) -> list[str]:
    rows = conn.execute(
        "SELECT envelope FROM commits WHERE run_id = ? AND round = ? ORDER BY hotkey",
        (run_id, index),
    )
    return [r["envelope"] for r in rows]


def commit_order(conn: sqlite3.Connection, run_id: str, index: int) -> list[str]:
    """The committing hotkeys in the order the service accepted them."""
    rows = conn.execute(
        "SELECT hotkey FROM commits WHERE run_id = ? AND round = ? ORDER BY rowid",
        (run_id, index),
    )
    return [r["hotkey"] for r in rows]


def commit_bytes(conn: sqlite3.Connection, run_id: str, index: int) -> int:
    """The bytes of a round's signed commits as stored."""
    row = conn.execute(
        "SELECT COALESCE(SUM(LENGTH(envelope)), 0) AS n FROM commits"
        " WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    return int(row["n"])


def verdict_envelopes(conn: sqlite3.Connection, run_id: str, index: int) -> list[tuple[str, str]]:
    """(verdict id, signed envelope) of a round's verdicts, by verdict id."""
    rows = conn.execute(
        "SELECT verdict_id, envelope FROM verdicts WHERE run_id = ? AND round = ?"
        " ORDER BY verdict_id",
        (run_id, index),
    )
    return [(r["verdict_id"], r["envelope"]) for r in rows]


def verdicts_on(conn: sqlite3.Connection, run_id: str, index: int, hotkey: str) -> list[VerdictRow]:
    """The verdicts on one island's audit in a round, by auditor."""
    rows = conn.execute(
        "SELECT verdict_id, auditor, result, body FROM verdicts"
        " WHERE run_id = ? AND round = ? AND hotkey = ? ORDER BY auditor",
        (run_id, index, hotkey),
    )
    return [VerdictRow(r["verdict_id"], r["auditor"], r["result"], r["body"]) for r in rows]


def merge_envelope(conn: sqlite3.Connection, run_id: str, index: int) -> str | None:
    row = conn.execute(
        "SELECT envelope FROM merges WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    return None if row is None else str(row["envelope"])


def merge_body(conn: sqlite3.Connection, run_id: str, index: int) -> str | None:
    row = conn.execute(
        "SELECT body FROM merges WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    return None if row is None else str(row["body"])


def selection_beacon(conn: sqlite3.Connection, run_id: str, index: int) -> BeaconRow | None:
    """The beacon round that selected a round's audits, once it is stored."""
    row = conn.execute(
        "SELECT b.* FROM beacons b JOIN rounds r ON b.round = r.selection_beacon_round"
        " WHERE r.run_id = ? AND r.round = ?",
        (run_id, index),
    ).fetchone()
    return None if row is None else BeaconRow(row["round"], row["randomness"], row["signature"])


def assignment_envelopes(conn: sqlite3.Connection, run_id: str, index: int) -> list[str]:
    rows = conn.execute(
        "SELECT envelope FROM audits WHERE run_id = ? AND round = ? ORDER BY hotkey",
        (run_id, index),
    )
    return [r["envelope"] for r in rows]


def probation_flags(conn: sqlite3.Connection, run_id: str, index: int) -> dict[str, bool]:
    """hotkey -> whether its audit in the round was a probation audit."""
    rows = conn.execute(
        "SELECT hotkey, probation FROM audits WHERE run_id = ? AND round = ?", (run_id, index)
    )
    return {r["hotkey"]: bool(r["probation"]) for r in rows}


def audits(conn: sqlite3.Connection, run_id: str) -> list[AuditRow]:
    """Every audit of a run, newest round first, with the beacon round that selected it."""
    rows = conn.execute(
        """
        SELECT a.round, a.hotkey, a.segments, a.probation, r.selection_beacon_round,
               b.randomness
        FROM audits a JOIN rounds r ON r.run_id = a.run_id AND r.round = a.round
        LEFT JOIN beacons b ON b.round = r.selection_beacon_round
        WHERE a.run_id = ? ORDER BY a.round DESC, a.hotkey
        """,
        (run_id,),
    )
    return [
        AuditRow(
            r["round"],
            r["hotkey"],
            r["segments"],
            bool(r["probation"]),
            r["selection_beacon_round"],
            r["randomness"],
        )
        for r in rows
    ]


def audit_load(conn: sqlite3.Connection, run_id: str, index: int) -> list[tuple[str, bool]]:
    """(segments JSON, island still in probation) of each audit of a round."""
    rows = conn.execute(
        "SELECT a.segments, COALESCE(r.probation_until_round, 0) > a.round AS new"
        " FROM audits a LEFT JOIN roster r ON r.run_id = a.run_id AND r.hotkey = a.hotkey"
        " WHERE a.run_id = ? AND a.round = ?",
        (run_id, index),
    )
    return [(r["segments"], bool(r["new"])) for r in rows]


def roster(conn: sqlite3.Connection, run_id: str) -> list[RosterRow]:
    """Every admitted island of a run, by hotkey, with its commits and tokens."""
    rows = conn.execute(
        """
        SELECT r.*,
          (SELECT COUNT(*) FROM commits c WHERE c.run_id = r.run_id AND c.hotkey = r.hotkey)
             AS commits,
          (SELECT COALESCE(SUM(tokens), 0) FROM commits c
             WHERE c.run_id = r.run_id AND c.hotkey = r.hotkey) AS tokens,
          (SELECT MAX(round) FROM rounds x WHERE x.run_id = r.run_id) AS last_round
        FROM roster r WHERE r.run_id = ? ORDER BY r.hotkey
        """,
        (run_id,),
    )
    return [
        RosterRow(
            hotkey=r["hotkey"],
            first_round=r["first_round"],
            probation_until_round=r["probation_until_round"],
            device_class=r["device_class"],
            num_devices=r["num_devices"],
            commits=r["commits"],
            tokens=r["tokens"],
            last_round=r["last_round"],
            left_round=r["left_round"],
            proven_memory_bytes=r["proven_memory_bytes"],
        )
        for r in rows
    ]


def join_body(conn: sqlite3.Connection, run_id: str, hotkey: str) -> str | None:
    """The join request an island was admitted with (JSON), if it is admitted."""
    row = conn.execute(
        "SELECT join_body FROM roster WHERE run_id = ? AND hotkey = ?", (run_id, hotkey)
    ).fetchone()
    return None if row is None else str(row["join_body"])


def islands(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """(run id, hotkey) of every island of every run."""
    rows = conn.execute("SELECT run_id, hotkey FROM roster")
    return [(r["run_id"], r["hotkey"]) for r in rows]


def timing(conn: sqlite3.Connection, run_id: str) -> dict[int, RoundTiming]:
    """round -> the beacon rounds of its opening, last accepted commit and merge."""
    rows = conn.execute(
        """
        SELECT r.round, r.open_beacon_round,
          (SELECT MAX(accepted_beacon_round) FROM commits c
             WHERE c.run_id = r.run_id AND c.round = r.round) AS last_commit,
          (SELECT received_beacon_round FROM merges m
             WHERE m.run_id = r.run_id AND m.round = r.round) AS merged
        FROM rounds r WHERE r.run_id = ?
        """,
        (run_id,),
    )
    return {
        r["round"]: RoundTiming(r["open_beacon_round"], r["last_commit"], r["merged"]) for r in rows
    }


def last_sync(conn: sqlite3.Connection, run_id: str, hotkey: str) -> int | None:
    """Beacon round at which the last merge including this island's commit was accepted."""
    row = conn.execute(
        "SELECT MAX(m.received_beacon_round) AS b FROM merges m JOIN commits c"
        " ON c.run_id = m.run_id AND c.round = m.round WHERE m.run_id = ? AND c.hotkey = ?",
        (run_id, hotkey),
    ).fetchone()
    return None if row is None or row["b"] is None else int(row["b"])


def commit_progress(conn: sqlite3.Connection, run_id: str, index: int) -> tuple[int, int | None]:
    """(commits accepted, beacon round of the last one) of a round."""
    row = conn.execute(
        "SELECT COUNT(*) AS n, MAX(accepted_beacon_round) AS last FROM commits"
        " WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    return int(row["n"]), None if row["last"] is None else int(row["last"])


@dataclass(frozen=True, slots=True)
class OpenRound:
    """A round that is not final yet: what the state machine needs to move it."""

    run_id: str
    round: int
    phase: Phase
    commit_deadline: int
    audit_close_round: int | None
    open_envelope: str


def add_run(
    conn: sqlite3.Connection, run_id: str, manifest_json: str, envelope: str, digest: str
) -> None:
    """Store a run (raises ``sqlite3.IntegrityError`` when the id is taken)."""
    conn.execute(
        "INSERT INTO runs VALUES (?, ?, ?, ?, ?)",
        (run_id, manifest_json, envelope, digest, time.time()),
    )


def last_round(conn: sqlite3.Connection, run_id: str) -> tuple[int, Phase] | None:
    """(index, phase) of a run's newest round (None before round 0)."""
    row = conn.execute(
        "SELECT round, phase FROM rounds WHERE run_id = ? ORDER BY round DESC LIMIT 1", (run_id,)
    ).fetchone()
    return None if row is None else (int(row["round"]), row["phase"])


@dataclass(frozen=True, slots=True)
class NewRound:
    """A round as it opens: its beacon round, deadlines, start model and signed record."""

    run_id: str
    round: int
    beacon: BeaconRow
    assignment_key: str
    commit_deadline: int
    start_model_sha256: str
    start_model_url: str
    open_envelope: str


def add_round(conn: sqlite3.Connection, new: NewRound) -> None:
    conn.execute(
        "INSERT INTO rounds (run_id, round, phase, open_beacon_round, randomness,"
        " assignment_key, commit_deadline, start_model_sha256, start_model_url,"
        " open_envelope) VALUES (?, ?, 'train', ?, ?, ?, ?, ?, ?, ?)",
        (
            new.run_id,
            new.round,
            new.beacon.round,
            new.beacon.randomness,
            new.assignment_key,
            new.commit_deadline,
            new.start_model_sha256,
            new.start_model_url,
            new.open_envelope,
        ),
    )


def roster_layouts(conn: sqlite3.Connection, run_id: str) -> list[tuple[str, str]]:
    """(hotkey, admitted layout JSON) of a run's islands that have not left, by hotkey."""
    rows = conn.execute(
        "SELECT hotkey, layout FROM roster WHERE run_id = ? AND left_round IS NULL ORDER BY hotkey",
        (run_id,),
    )
    return [(r["hotkey"], r["layout"]) for r in rows]


def remember_beacon(conn: sqlite3.Connection, beacon: BeaconRow) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO beacons VALUES (?, ?, ?)",
        (beacon.round, beacon.randomness, beacon.signature),
    )


def beacon(conn: sqlite3.Connection, number: int) -> BeaconRow | None:
    row = conn.execute("SELECT * FROM beacons WHERE round = ?", (number,)).fetchone()
    return None if row is None else BeaconRow(number, row["randomness"], row["signature"])


def open_rounds(conn: sqlite3.Connection) -> list[OpenRound]:
    """Every round of every run that is not final, by run and round."""
    rows = conn.execute(
        "SELECT run_id, round, phase, commit_deadline, audit_close_round, open_envelope"
        " FROM rounds WHERE phase != 'final' ORDER BY run_id, round"
    )
    return [
        OpenRound(
            r["run_id"],
            r["round"],
            r["phase"],
            r["commit_deadline"],
            r["audit_close_round"],
            r["open_envelope"],
        )
        for r in rows
    ]


def committed_probation(conn: sqlite3.Connection, run_id: str, index: int) -> dict[str, int]:
    """hotkey -> the round its probation ends, for each island that committed to a round."""
    rows = conn.execute(
        "SELECT c.hotkey, r.probation_until_round FROM commits c JOIN roster r"
        " ON r.run_id = c.run_id AND r.hotkey = c.hotkey WHERE c.run_id = ? AND c.round = ?",
        (run_id, index),
    )
    return {r["hotkey"]: int(r["probation_until_round"]) for r in rows}


def add_audit(
    conn: sqlite3.Connection,
    run_id: str,
    index: int,
    hotkey: str,
    segments: str,
    probation: bool,
    envelope: str,
) -> None:
    conn.execute(
        "INSERT INTO audits VALUES (?, ?, ?, ?, ?, ?)",
        (run_id, index, hotkey, segments, int(probation), envelope),
    )


def start_audit(
    conn: sqlite3.Connection, run_id: str, index: int, selector: int, close: int, dispute: int
) -> None:
    """A round enters its audit: the selecting beacon round and the two deadlines."""
    conn.execute(
        "UPDATE rounds SET phase = 'audit', selection_beacon_round = ?, audit_close_round = ?,"
        " dispute_deadline_round = ? WHERE run_id = ? AND round = ?",
        (selector, close, dispute, run_id, index),
    )


def has_commits(conn: sqlite3.Connection, run_id: str, index: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM commits WHERE run_id = ? AND round = ? LIMIT 1", (run_id, index)
    ).fetchone()
    return row is not None


def set_phase(conn: sqlite3.Connection, run_id: str, index: int, phase: Phase) -> None:
    conn.execute(
        "UPDATE rounds SET phase = ? WHERE run_id = ? AND round = ?", (phase, run_id, index)
    )


@dataclass(frozen=True, slots=True)
class RoundRecord:
    """A round's phase, deadlines, start model and signed open record."""

    run_id: str
    round: int
    phase: Phase
    commit_deadline: int
    audit_close_round: int | None
    dispute_deadline_round: int | None
    start_model_sha256: str | None
    open_envelope: str


def round_record(conn: sqlite3.Connection, run_id: str, index: int) -> RoundRecord | None:
    """Round ``index`` of a run (None: it was never opened)."""
    r = conn.execute(
        "SELECT * FROM rounds WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    if r is None:
        return None
    return RoundRecord(
        run_id=r["run_id"],
        round=r["round"],
        phase=r["phase"],
        commit_deadline=r["commit_deadline"],
        audit_close_round=r["audit_close_round"],
        dispute_deadline_round=r["dispute_deadline_round"],
        start_model_sha256=r["start_model_sha256"],
        open_envelope=r["open_envelope"],
    )


def add_settlements(
    conn: sqlite3.Connection, run_id: str, index: int, paid: dict[str, int], epoch: int
) -> None:
    """Record the tokens each island of a settled round was paid for, at ``epoch``."""
    conn.executemany(
        "INSERT INTO settlements VALUES (?, ?, ?, ?, ?)",
        [(run_id, index, hotkey, tokens, epoch) for hotkey, tokens in paid.items()],
    )


def mark_final(conn: sqlite3.Connection, run_id: str, index: int, epoch: int) -> None:
    """The round is settled at ``epoch``: its phase is ``final``."""
    conn.execute(
        "UPDATE rounds SET phase = 'final', settled_epoch = ? WHERE run_id = ? AND round = ?",
        (epoch, run_id, index),
    )


def settled_rounds(conn: sqlite3.Connection, run_id: str, hotkey: str, first: int) -> list[int]:
    """The final rounds from ``first`` on whose settlement paid ``hotkey``, in order."""
    rows = conn.execute(
        "SELECT s.round FROM settlements s JOIN rounds r"
        " ON r.run_id = s.run_id AND r.round = s.round"
        " WHERE s.run_id = ? AND s.hotkey = ? AND s.round >= ? AND r.phase = 'final'"
        " ORDER BY s.round",
        (run_id, hotkey, first),
    ).fetchall()
    return [int(r["round"]) for r in rows]


@dataclass(frozen=True, slots=True)
class VerdictRecord:
    """A stored verdict: who judged which island in which round, its result and arrival."""

    verdict_id: str
    run_id: str
    round: int
    hotkey: str
    auditor: str
    result: str
    body: str  # the verdict body as stored (JSON)
    received_beacon_round: int


def _verdict_record(r: sqlite3.Row) -> VerdictRecord:
    return VerdictRecord(
        verdict_id=r["verdict_id"],
        run_id=r["run_id"],
        round=r["round"],
        hotkey=r["hotkey"],
        auditor=r["auditor"],
        result=r["result"],
        body=r["body"],
        received_beacon_round=r["received_beacon_round"],
    )


def verdict_record(
    conn: sqlite3.Connection, run_id: str, index: int, verdict_id: str
) -> VerdictRecord | None:
    """A verdict of a round by its id (None: no such verdict in that round)."""
    row = conn.execute(
        "SELECT verdict_id, run_id, round, hotkey, auditor, result, body,"
        " received_beacon_round FROM verdicts WHERE verdict_id = ? AND run_id = ? AND round = ?",
        (verdict_id, run_id, index),
    ).fetchone()
    return None if row is None else _verdict_record(row)


def fault_verdicts_received(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str, received: int
) -> list[VerdictRecord]:
    """The fault verdicts (anything but ``match``) on one island of round ``index`` that
    arrived at beacon round ``received``, by id."""
    rows = conn.execute(
        "SELECT verdict_id, run_id, round, hotkey, auditor, result, body,"
        " received_beacon_round FROM verdicts WHERE run_id = ? AND round = ? AND hotkey = ?"
        " AND received_beacon_round = ? AND result != 'match' ORDER BY verdict_id",
        (run_id, index, hotkey, received),
    ).fetchall()
    return [_verdict_record(r) for r in rows]


def verdict_by(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str, auditor: str
) -> VerdictRecord | None:
    """One auditor's verdict on one island's round (None: it has not judged it)."""
    row = conn.execute(
        "SELECT verdict_id, run_id, round, hotkey, auditor, result, body,"
        " received_beacon_round FROM verdicts WHERE run_id = ? AND round = ? AND hotkey = ?"
        " AND auditor = ?",
        (run_id, index, hotkey, auditor),
    ).fetchone()
    return None if row is None else _verdict_record(row)


def other_verdicts(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str, auditor: str
) -> list[VerdictRecord]:
    """The verdicts of every other auditor on one island's round, in order of arrival."""
    rows = conn.execute(
        "SELECT verdict_id, run_id, round, hotkey, auditor, result, body,"
        " received_beacon_round FROM verdicts WHERE run_id = ? AND round = ? AND hotkey = ?"
        " AND auditor != ? ORDER BY received_beacon_round, verdict_id",
        (run_id, index, hotkey, auditor),
    )
    return [_verdict_record(r) for r in rows]


def unfinal_verdicts_by(conn: sqlite3.Connection, run_id: str, auditor: str) -> list[VerdictRecord]:
    """An auditor's verdicts in the rounds of a run that are not final, by round and island."""
    rows = conn.execute(
        "SELECT v.verdict_id, v.run_id, v.round, v.hotkey, v.auditor, v.result, v.body,"
        " v.received_beacon_round FROM verdicts v JOIN rounds r ON r.run_id = v.run_id"
        " AND r.round = v.round WHERE v.run_id = ? AND v.auditor = ? AND r.phase != 'final'"
        " ORDER BY v.round, v.hotkey",
        (run_id, auditor),
    )
    return [_verdict_record(r) for r in rows]


@dataclass(frozen=True, slots=True)
class RoundState:
    """A round's phase, its dispute deadline (once audited) and its signed opening."""

    phase: Phase
    dispute_deadline_round: int | None
    open_envelope: str


def round_state(conn: sqlite3.Connection, run_id: str, index: int) -> RoundState | None:
    row = conn.execute(
        "SELECT phase, dispute_deadline_round, open_envelope FROM rounds"
        " WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    if row is None:
        return None
    return RoundState(row["phase"], row["dispute_deadline_round"], row["open_envelope"])


def commit_body(conn: sqlite3.Connection, run_id: str, index: int, hotkey: str) -> str | None:
    """An island's commit body (JSON) of a round (None: it did not commit)."""
    row = conn.execute(
        "SELECT body FROM commits WHERE run_id = ? AND round = ? AND hotkey = ?",
        (run_id, index, hotkey),
    ).fetchone()
    return None if row is None else str(row["body"])


def assignment_envelope(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str
) -> str | None:
    """The signed audit assignment of one island's round (None: it was not audited)."""
    row = conn.execute(
        "SELECT envelope FROM audits WHERE run_id = ? AND round = ? AND hotkey = ?",
        (run_id, index, hotkey),
    ).fetchone()
    return None if row is None else str(row["envelope"])


@dataclass(frozen=True, slots=True)
class UnjudgedAudit:
    round: int
    hotkey: str
    envelope: str  # the signed assignment


def unjudged_audits(conn: sqlite3.Connection, run_id: str, now: int) -> list[UnjudgedAudit]:
    """Assigned audits of rounds past their audit phase that no verdict ever judged, or
    whose late panel is still open at beacon round ``now``, by round and island."""
    rows = conn.execute(
        "SELECT a.round, a.hotkey, a.envelope FROM audits a JOIN rounds r"
        " ON r.run_id = a.run_id AND r.round = a.round"
        " WHERE a.run_id = ? AND r.phase IN ('merge', 'settle', 'final') AND (NOT EXISTS"
        " (SELECT 1 FROM verdicts v WHERE v.run_id = a.run_id AND v.round = a.round"
        " AND v.hotkey = a.hotkey) OR EXISTS (SELECT 1 FROM late_panels p"
        " WHERE p.run_id = a.run_id AND p.round = a.round AND p.hotkey = a.hotkey"
        " AND p.close_round >= ?)) ORDER BY a.round, a.hotkey",
        (run_id, now),
    )
    return [UnjudgedAudit(r["round"], r["hotkey"], r["envelope"]) for r in rows]


def audit_phase_audits(conn: sqlite3.Connection, run_id: str) -> list[UnjudgedAudit]:
    """Assigned audits of the run's rounds in their audit phase, by round and island."""
    rows = conn.execute(
        "SELECT a.round, a.hotkey, a.envelope FROM audits a JOIN rounds r"
        " ON r.run_id = a.run_id AND r.round = a.round"
        " WHERE a.run_id = ? AND r.phase = 'audit' ORDER BY a.round, a.hotkey",
        (run_id,),
    )
    return [UnjudgedAudit(r["round"], r["hotkey"], r["envelope"]) for r in rows]


@dataclass(frozen=True, slots=True)
class IslandSpan:
    """One island's record over rounds ``first`` to ``last``: rounds it committed to and
    rounds it was audited in (which of them faulted it is the settlement rule's:
    ``rounds.facts.run_faults``, never a raw verdict count)."""

    rounds_run: int
    audited: int


def island_span(
    conn: sqlite3.Connection, run_id: str, hotkey: str, first: int, last: int
) -> IslandSpan:
    bind = (hotkey, run_id, first, last)
    return IslandSpan(
        rounds_run=_count(
            conn,
            "SELECT COUNT(*) FROM commits WHERE hotkey = ? AND run_id = ?"
            " AND round BETWEEN ? AND ?",
            bind,
        ),
        audited=_count(
            conn,
            "SELECT COUNT(*) FROM audits WHERE hotkey = ? AND run_id = ? AND round BETWEEN ? AND ?",
            bind,
        ),
    )


def verdicts_signed(
    conn: sqlite3.Connection, run_id: str, auditor: str, first: int, last: int
) -> int:
    """How many verdicts an auditor signed in rounds ``first`` to ``last``."""
    return _count(
        conn,
        "SELECT COUNT(*) FROM verdicts WHERE auditor = ? AND run_id = ? AND round BETWEEN ? AND ?",
        (auditor, run_id, first, last),
    )


def _count(conn: sqlite3.Connection, sql: str, args: tuple[str | int, ...]) -> int:
    return int(conn.execute(sql, args).fetchone()[0])


def roster_keys(conn: sqlite3.Connection, run_id: str) -> frozenset[str]:
    """Every island key of the run's roster (admitted, whether or not it committed)."""
    rows = conn.execute("SELECT hotkey FROM roster WHERE run_id = ?", (run_id,))
    return frozenset(str(r[0]) for r in rows)


def verdict_signers(
    conn: sqlite3.Connection, run_id: str, until: int | None = None
) -> frozenset[str]:
    """Every key that signed a verdict of the run (received by beacon round ``until``)."""
    sql, args = "SELECT DISTINCT auditor FROM verdicts WHERE run_id = ?", [run_id]
    if until is not None:
        sql, args = sql + " AND received_beacon_round <= ?", [run_id, str(until)]
    return frozenset(str(r[0]) for r in conn.execute(sql, args))


def judges_of(conn: sqlite3.Connection, run_id: str, index: int) -> dict[str, frozenset[str]]:
    """Assigned hotkey of a round -> the keys that signed a verdict on it."""
    out: dict[str, set[str]] = {
        str(r[0]): set()
        for r in conn.execute(
            "SELECT hotkey FROM audits WHERE run_id = ? AND round = ?", (run_id, index)
        )
    }
    for hotkey, auditor in conn.execute(
        "SELECT hotkey, auditor FROM verdicts WHERE run_id = ? AND round = ?", (run_id, index)
    ):
        if hotkey in out:
            out[hotkey].add(str(auditor))
    return {h: frozenset(keys) for h, keys in out.items()}


@dataclass(frozen=True, slots=True)
class LatePanelRow:
    """The late window of an assignment that had no judging verdict when its audit phase
    ended: the jury fixed when its first late verdict came, and the window's last round."""

    round: int
    hotkey: str
    opened_beacon_round: int
    close_round: int
    jury: tuple[str, ...]


def late_panels(
    conn: sqlite3.Connection, run_id: str, index: int | None = None
) -> list[LatePanelRow]:
    """The run's late panels (or one round's), by round and island."""
    sql, args = "SELECT * FROM late_panels WHERE run_id = ?", [run_id]
    if index is not None:
        sql, args = sql + " AND round = ?", [run_id, str(index)]
    rows = conn.execute(sql + " ORDER BY round, hotkey", args)
    return [
        LatePanelRow(
            int(r["round"]),
            r["hotkey"],
            int(r["opened_beacon_round"]),
            int(r["close_round"]),
            tuple(str(k) for k in json.loads(r["jury"])),
        )
        for r in rows
    ]


def late_panel(
    conn: sqlite3.Connection, run_id: str, index: int, hotkey: str
) -> LatePanelRow | None:
    """One assignment's late panel (None: no late verdict opened one)."""
    return next((p for p in late_panels(conn, run_id, index) if p.hotkey == hotkey), None)


def open_late_panel(conn: sqlite3.Connection, run_id: str, panel: LatePanelRow) -> None:
    """Store an assignment's late panel (once: a stored one stays)."""
    conn.execute(
        "INSERT OR IGNORE INTO late_panels (run_id, round, hotkey, opened_beacon_round,"
        " close_round, jury) VALUES (?, ?, ?, ?, ?, ?)",
        (
            run_id,
            panel.round,
            panel.hotkey,
            panel.opened_beacon_round,
            panel.close_round,
            json.dumps(sorted(panel.jury)),
        ),
    )


def audit_span(conn: sqlite3.Connection, run_id: str, index: int) -> tuple[int, int] | None:
    """A round's selection beacon round and its audit window's last round (None: not
    selected yet)."""
    row = conn.execute(
        "SELECT selection_beacon_round, audit_close_round FROM rounds"
        " WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    if row is None or row["selection_beacon_round"] is None:
        return None
    return int(row["selection_beacon_round"]), int(row["audit_close_round"])
