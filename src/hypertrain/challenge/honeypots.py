"""Honeypot reveal and the public per-strategy table of catches and false positives.

Once the manifest's ``honeypots.reveal_round`` is final, the operator posts the
list; the service stores it only if it hashes to the manifest's commitment. The table
is computed from public records (commits, assignments, verdicts, disputes):

* islands: rounds run (committed), audited, caught (rounds the settlement rule
  faulted: a standing verdict or its own blob), missed (cheating rounds not caught),
  false positives (a mismatch on an honest honeypot, before any dispute), disputes won
  and lost;
* auditors: verdicts signed, and their disputes lost (verdicts overturned) and won.
"""

from __future__ import annotations

from typing import Any

from hypertrain.challenge import facts
from hypertrain.challenge.errors import ChallengeError, ConflictError, NotFoundError, PhaseError
from hypertrain.challenge.state import ServiceState, quick_dumps
from hypertrain.protocol.honeypots import HoneypotList, commitment
from hypertrain.protocol.sqlite import transaction


def reveal(state: ServiceState, run_id: str, honeypots: HoneypotList) -> dict[str, Any]:
    spec = state.manifest(run_id).honeypots
    if not spec.commitment:
        raise ChallengeError(f"run {run_id} committed to no honeypot list", code="no_commitment")
    row = state.conn.execute(
        "SELECT phase FROM rounds WHERE run_id = ? AND round = ?", (run_id, spec.reveal_round)
    ).fetchone()
    if row is None or row["phase"] != "final":
        raise PhaseError(
            f"the list may be revealed once round {spec.reveal_round} is final", code="early"
        )
    if commitment(honeypots) != spec.commitment:
        raise ChallengeError(
            "the list does not hash to the manifest's commitment", code="bad_reveal"
        )
    with transaction(state.conn):
        found = state.conn.execute(
            "SELECT 1 FROM honeypot_reveals WHERE run_id = ?", (run_id,)
        ).fetchone()
        if found:
            raise ConflictError("the honeypot list was already revealed", code="duplicate")
        state.conn.execute(
            "INSERT INTO honeypot_reveals VALUES (?, ?, ?)",
            (run_id, quick_dumps(honeypots.model_dump(mode="json")), state.current_round()),
        )
    return {"revealed": True, "commitment": spec.commitment, "entries": len(honeypots.entries)}


def revealed(state: ServiceState, run_id: str) -> HoneypotList:
    row = state.conn.execute(
        "SELECT list_json FROM honeypot_reveals WHERE run_id = ?", (run_id,)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"run {run_id} has not revealed its honeypots", code="not_revealed")
    return HoneypotList.model_validate_json(row["list_json"])


def table(state: ServiceState, run_id: str) -> list[dict[str, Any]]:
    """One row per strategy and role (see the module docstring)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    faults = facts.run_faults(state.conn, run_id)
    for entry in revealed(state, run_id).entries:
        key = (entry.role, entry.strategy)
        row = rows.setdefault(key, {"role": entry.role, "strategy": entry.strategy, "hotkeys": 0})
        row["hotkeys"] += 1
        counts = (
            _island(state, run_id, entry.hotkey, faults)
            if entry.role == "island"
            else _auditor(state, run_id, entry.hotkey)
        )
        for name, value in counts.items():
            row[name] = row.get(name, 0) + value
    for (role, strategy), row in rows.items():
        if role != "island":
            continue
        flagged = row.pop("flagged")
        if strategy == "honest":
            row["false_positives"] = flagged
        else:
            row["missed"] = row["rounds_run"] - row["caught"]
    return [rows[k] for k in sorted(rows)]


def _count(state: ServiceState, sql: str, *args: Any) -> int:
    return int(state.conn.execute(sql, args).fetchone()[0])


def _island(
    state: ServiceState, run_id: str, hotkey: str, faults: dict[int, dict[str, str]]
) -> dict[str, int]:
    mismatch = "SELECT COUNT(DISTINCT round) FROM verdicts WHERE run_id = ? AND hotkey = ?"
    mismatch += " AND result = 'mismatch'"
    disputes = "SELECT COUNT(*) FROM dispute_games WHERE run_id = ? AND hotkey = ? AND outcome = ?"
    return {
        "rounds_run": _count(
            state, "SELECT COUNT(*) FROM commits WHERE run_id = ? AND hotkey = ?", run_id, hotkey
        ),
        "audited": _count(
            state, "SELECT COUNT(*) FROM audits WHERE run_id = ? AND hotkey = ?", run_id, hotkey
        ),
        "caught": sum(1 for faulted in faults.values() if hotkey in faulted),
        "flagged": _count(state, mismatch, run_id, hotkey),
        "disputes_won": _count(state, disputes, run_id, hotkey, "overturned"),
        "disputes_lost": _count(state, disputes, run_id, hotkey, "upheld"),
    }


def _auditor(state: ServiceState, run_id: str, hotkey: str) -> dict[str, int]:
    disputes = "SELECT COUNT(*) FROM dispute_games WHERE run_id = ? AND auditor = ? AND outcome = ?"
    return {
        "verdicts": _count(
            state, "SELECT COUNT(*) FROM verdicts WHERE run_id = ? AND auditor = ?", run_id, hotkey
        ),
        "disputes_lost": _count(state, disputes, run_id, hotkey, "overturned"),
        "disputes_won": _count(state, disputes, run_id, hotkey, "upheld"),
    }
