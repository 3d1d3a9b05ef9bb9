"""The facts the service publishes, each read in one place and derived by one rule.

The standing verdict of an audit (:data:`STANDING_SQL`, then the late panels'
majority, :func:`~hypertrain.challenge.rounds.rule.late_standing`), a round's outcome
(:func:`round_outcome`, the pure :func:`~hypertrain.challenge.rounds.rule.decide` over typed
rows) and an island's faults (:func:`island_faults`, the rounds whose outcome faulted it)
are defined here only. Settlement, the public views (roster, rounds, summary), the
dashboard and the honeypot table all read them from here, so they cannot disagree.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from typing import cast

from pydantic import ValidationError

from hypertrain.challenge.errors import UnavailableError
from hypertrain.challenge.rounds import rule, storage
from hypertrain.challenge.rounds.rule import (
    CommitRow,
    Outcome,
    Standing,
    StandingVerdict,
    VerdictResult,
    decide,
)
from hypertrain.protocol.messages import MergeTape

# Every verdict with its standing: set aside (its audit is re-judged by another
# auditor: its auditor was found faulty, or a dispute against it waits for that
# independent re-audit), overturned by a dispute, or standing; and whether it is final
# (its round is final and no late dispute window of its own is open: nothing can
# change its standing any more).
STANDING_SQL = """
SELECT v.verdict_id, v.round, v.hotkey, v.auditor, v.result, v.received_beacon_round,
  CASE
    WHEN EXISTS (SELECT 1 FROM dispute_games d
                 WHERE d.verdict_id = v.verdict_id AND d.outcome = 'held')
      THEN 'held'
    WHEN EXISTS (SELECT 1 FROM reassigned_verdicts s WHERE s.verdict_id = v.verdict_id)
      THEN 'set_aside'
    WHEN EXISTS (SELECT 1 FROM dispute_games d
                 WHERE d.verdict_id = v.verdict_id AND d.outcome = 'overturned')
      THEN 'overturned'
    ELSE 'stands'
  END AS standing,
  EXISTS (SELECT 1 FROM rounds r WHERE r.run_id = v.run_id AND r.round = v.round
          AND r.phase = 'final')
  AND NOT EXISTS (SELECT 1 FROM verdict_windows w
                  WHERE w.verdict_id = v.verdict_id AND w.closed = 0) AS final
FROM verdicts v WHERE v.run_id = ?
"""


class CorruptRecordError(UnavailableError):
    """A stored record the service wrote no longer parses (refuse, never guess)."""


@dataclass(frozen=True)
class RoundInputs:
    """Everything :func:`~hypertrain.challenge.rounds.rule.decide` needs for one round."""

    commits: list[CommitRow]
    tape: MergeTape | None
    verdicts: list[StandingVerdict]
    assigned: frozenset[str]
    probation: dict[str, int]
    earlier: frozenset[str] = frozenset()  # an earlier round's audit of them is unproven
    proven: dict[str, str] = field(default_factory=dict)  # a proven earlier fault of them

    def outcome(self) -> Outcome:
        return decide(
            self.commits,
            self.tape,
            self.verdicts,
            self.assigned,
            self.probation,
            self.earlier,
            self.proven,
        )


def standing_verdicts(
    conn: sqlite3.Connection, run_id: str, index: int | None = None
) -> list[StandingVerdict]:
    """The run's verdicts (or one round's) with their standing, by round and verdict id."""
    sql, args = STANDING_SQL, [run_id]
    if index is not None:
        sql, args = sql + " AND v.round = ?", [run_id, str(index)]
    rows = conn.execute(sql + " ORDER BY v.round, v.verdict_id", args)
    verdicts = [
        StandingVerdict(
            r["verdict_id"],
            int(r["round"]),
            r["hotkey"],
            r["auditor"],
            cast(VerdictResult, r["result"]),
            cast(Standing, r["standing"]),
            bool(r["final"]),
            int(r["received_beacon_round"]),
        )
        for r in rows
    ]
    panels = [
        rule.LatePanel(p.round, p.hotkey, p.opened_beacon_round, frozenset(p.jury))
        for p in storage.late_panels(conn, run_id, index)
    ]
    return rule.late_standing(verdicts, panels)


def judged(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """Hotkeys of the round with a verdict that judged their audit (not set aside)."""
    return frozenset(v.hotkey for v in standing_verdicts(conn, run_id, index) if v.judged)


def unjudged(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """The round's assigned hotkeys still waiting for a judging verdict."""
    assigned = conn.execute(
        "SELECT hotkey FROM audits WHERE run_id = ? AND round = ?", (run_id, index)
    )
    return rule.unjudged((r["hotkey"] for r in assigned), standing_verdicts(conn, run_id, index))


def parse_tape(body: str) -> MergeTape:
    """A stored merge-tape body as its model (it validated when it was accepted)."""
    try:
        return MergeTape.model_validate_json(body)
    except ValidationError as exc:
        raise CorruptRecordError(
            f"a stored merge tape does not parse: {exc}", code="corrupt"
        ) from exc


def merge_tape(conn: sqlite3.Connection, run_id: str, index: int) -> MergeTape | None:
    row = conn.execute(
        "SELECT body FROM merges WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    return None if row is None else parse_tape(row["body"])


def earlier_audits(
    conn: sqlite3.Connection, run_id: str, index: int
) -> tuple[frozenset[str], dict[str, str]]:
    """Before round ``index``: the hotkeys whose audit is unproven (no judging verdict,
    or a fault that may still change), and those with a proven fault (with its reason)."""
    assigned = [
        (int(r["round"]), r["hotkey"])
        for r in conn.execute(
            "SELECT round, hotkey FROM audits WHERE run_id = ? AND round < ?", (run_id, index)
        )
    ]
    verdicts = standing_verdicts(conn, run_id)
    return rule.earlier_unproven(index, assigned, verdicts), rule.earlier_faults(index, verdicts)


def round_inputs(conn: sqlite3.Connection, run_id: str, index: int) -> RoundInputs:
    """One round's commits, tape, standing verdicts, assignments, probation ends and the
    islands an earlier round's unproven audit holds."""
    args = (run_id, index)
    commits = [
        CommitRow(r["hotkey"], int(r["tokens"]))
        for r in conn.execute(
            "SELECT hotkey, tokens FROM commits WHERE run_id = ? AND round = ?", args
        )
    ]
    assigned = frozenset(
        r["hotkey"]
        for r in conn.execute("SELECT hotkey FROM audits WHERE run_id = ? AND round = ?", args)
    )
    probation = {
        r["hotkey"]: int(r["probation_until_round"])
        for r in conn.execute(
            "SELECT hotkey, probation_until_round FROM roster"
            " WHERE run_id = ? AND probation_until_round > ?",
            args,
        )
    }
    earlier, proven = earlier_audits(conn, run_id, index)
    return RoundInputs(
        commits,
        merge_tape(conn, run_id, index),
        standing_verdicts(conn, run_id, index),
        assigned,
        probation,
        earlier,
        proven,
    )


def round_outcome(conn: sqlite3.Connection, run_id: str, index: int) -> Outcome:
    """The round's outcome as settlement decides it (and every view reports it)."""
    return round_inputs(conn, run_id, index).outcome()


def run_faults(conn: sqlite3.Connection, run_id: str) -> dict[int, dict[str, str]]:
    """round -> hotkey -> fault reason, for every round of the run (three reads in all)."""
    commits: dict[int, list[CommitRow]] = defaultdict(list)
    for r in conn.execute("SELECT round, hotkey, tokens FROM commits WHERE run_id = ?", (run_id,)):
        commits[int(r["round"])].append(CommitRow(r["hotkey"], int(r["tokens"])))
    tapes = {
        int(r["round"]): parse_tape(r["body"])
        for r in conn.execute("SELECT round, body FROM merges WHERE run_id = ?", (run_id,))
    }
    verdicts: dict[int, list[StandingVerdict]] = defaultdict(list)
    for v in standing_verdicts(conn, run_id):
        verdicts[v.round].append(v)
    return {
        index: decide(rows, tapes.get(index), verdicts[index]).faults
        for index, rows in sorted(commits.items())
    }


def island_faults(conn: sqlite3.Connection, run_id: str) -> dict[str, int]:
    """hotkey -> how many rounds faulted it (by a standing verdict or its own blob)."""
    out: dict[str, int] = {}
    for faults in run_faults(conn, run_id).values():
        for hotkey in faults:
            out[hotkey] = out.get(hotkey, 0) + 1
    return out
