"""Honeypot periods: commit a list before its rounds, reveal it after, tabulate every reveal.

The operator runs honeypots in periods of rounds. Period 0 is the manifest's
``honeypots.commitment`` (rounds 0 to ``honeypots.reveal_round``); each later period is
committed with :func:`commit_period` before any of its rounds opens (``late``
otherwise), after the previous period's last round. Once a period's last round is
final, :func:`reveal` stores its list if, and only if, it hashes to that period's
commitment: a list that matches no commitment, or another period's, is ``bad_reveal``
and changes nothing; a second reveal of a period is ``duplicate``.

The public table (:func:`table`) accumulates over every revealed period, each entry
counted only over its own period's rounds, from public records (commits, assignments,
verdicts, disputes):

* islands: rounds run (committed), audited, caught (rounds it is accused in: the
  settlement rule faults it on a standing verdict, :func:`facts.run_accusations`, never a raw
  ``mismatch`` row), missed (cheating rounds not caught), false positives (the same count
  for an honest honeypot: an overturned or set-aside verdict is none), disputes won and
  lost;
* auditors: verdicts signed, and their disputes lost (verdicts overturned) and won.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field

from hypertrain.api.disputes import HoneypotPeriodPublic, HoneypotRevealAck, HoneypotRow
from hypertrain.challenge import facts
from hypertrain.challenge.errors import ChallengeError, ConflictError, NotFoundError, PhaseError
from hypertrain.challenge.facts.progress import next_round
from hypertrain.challenge.store import (
    audit_storage,
    game_storage,
    honeypot_storage,
    rounds_storage,
    verdict_storage,
)
from hypertrain.protocol.honeypots import HoneypotList, HoneypotPeriod, commitment
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.sqlite import transaction


def commit_period(
    conn: sqlite3.Connection,
    manifest: RunManifest,
    current_round: Callable[[], int],
    run_id: str,
    body: HoneypotPeriod,
) -> HoneypotPeriodPublic:
    """Record the commitment of the next period's list, before its first round opens
    (``manifest``: the run's; ``current_round``: the verified beacon round, read only
    once every check passed)."""
    known = periods(conn, manifest, run_id)
    expected = known[-1].period + 1 if known else 0
    if body.period < expected:
        raise ConflictError(f"period {body.period} is already committed", code="duplicate")
    if body.period > expected:
        raise ChallengeError(f"the next period is {expected}, not {body.period}", code="bad_period")
    if known and body.first_round <= known[-1].last_round:
        raise ChallengeError(
            f"period {body.period} starts at round {body.first_round}, inside period"
            f" {known[-1].period} (to round {known[-1].last_round})",
            code="overlap",
        )
    opened = next_round(conn, run_id)
    if body.first_round < opened:
        raise PhaseError(
            f"round {body.first_round} has opened already (next round {opened}): a list is"
            " committed before its first round",
            code="late",
        )
    zero = _manifest_period(manifest)
    with transaction(conn):
        if zero is not None:
            honeypot_storage.add_period(conn, run_id, zero, 0, ignore=True)
        honeypot_storage.add_period(conn, run_id, body, current_round())
    return periods(conn, manifest, run_id)[-1]


def reveal(
    conn: sqlite3.Connection,
    manifest: RunManifest,
    current_round: Callable[[], int],
    run_id: str,
    honeypots: HoneypotList,
    period: int | None = None,
) -> HoneypotRevealAck:
    """Store a period's list once its last round is final and it hashes to the commitment
    (``period``: the period it must be; None: the period whose commitment it matches;
    ``manifest``: the run's; ``current_round``: the verified beacon round, read once every
    check passed)."""
    known = periods(conn, manifest, run_id)
    if not known:
        raise ChallengeError(f"run {run_id} committed to no honeypot list", code="no_commitment")
    digest = commitment(honeypots)
    chosen = [p for p in known if (p.period == period if period is not None else True)]
    if period is not None and not chosen:
        raise NotFoundError(f"run {run_id} has no honeypot period {period}", code="no_period")
    match = next((p for p in chosen if p.commitment == digest), None)
    if match is None:
        where = f"period {period}'s commitment" if period is not None else "any committed period"
        raise ChallengeError(f"the list does not hash to {where}", code="bad_reveal")
    if not _final(conn, run_id, match.last_round):
        raise PhaseError(
            f"the list may be revealed once round {match.last_round} is final", code="early"
        )
    if match.revealed is not None:
        raise ConflictError(f"period {match.period} was already revealed", code="duplicate")
    zero = _manifest_period(manifest)
    with transaction(conn):
        if zero is not None:  # the manifest's period gets its row when first written
            honeypot_storage.add_period(conn, run_id, zero, 0, ignore=True)
        honeypot_storage.reveal_period(
            conn,
            run_id,
            match.period,
            _compact(honeypots.model_dump(mode="json")),
            current_round(),
        )
    return HoneypotRevealAck(
        revealed=True, period=match.period, commitment=digest, entries=len(honeypots.entries)
    )


def periods(
    conn: sqlite3.Connection, manifest: RunManifest, run_id: str
) -> list[HoneypotPeriodPublic]:
    """Every committed period in order (the manifest's period 0 first, if it has one;
    ``manifest``: the run's)."""
    out = [_public(r) for r in honeypot_storage.periods(conn, run_id)]
    zero = _manifest_period(manifest)
    if zero is not None and not (out and out[0].period == 0):
        out.insert(0, HoneypotPeriodPublic(**zero.model_dump(), committed_beacon_round=0))
    return out


def _manifest_period(manifest: RunManifest) -> HoneypotPeriod | None:
    """Period 0 as the signed manifest commits it (None: the manifest commits none)."""
    spec = manifest.honeypots
    if not spec.commitment:
        return None
    return HoneypotPeriod(
        period=0, first_round=0, last_round=spec.reveal_round, commitment=spec.commitment
    )


def revealed(
    conn: sqlite3.Connection, manifest: RunManifest, run_id: str
) -> list[HoneypotPeriodPublic]:
    """The revealed periods; ``not_revealed`` (404) while there is none."""
    done = [p for p in periods(conn, manifest, run_id) if p.revealed is not None]
    if not done:
        raise NotFoundError(f"run {run_id} has not revealed its honeypots", code="not_revealed")
    return done


@dataclass
class _Tally:
    """One (role, strategy) row while it is summed over hotkeys and periods."""

    hotkeys: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, hotkey: str, counts: dict[str, int]) -> None:
        self.hotkeys.add(hotkey)
        for name, value in counts.items():
            self.counts[name] = self.counts.get(name, 0) + value


def table(conn: sqlite3.Connection, manifest: RunManifest, run_id: str) -> list[HoneypotRow]:
    """One row per role and strategy, accumulated over every revealed period."""
    rows: dict[tuple[str, str], _Tally] = {}
    accused = facts.run_accusations(conn, run_id)
    for p in revealed(conn, manifest, run_id):
        assert p.revealed is not None
        span = (p.first_round, p.last_round)
        for entry in p.revealed.entries:
            counts = (
                _island(conn, run_id, entry.hotkey, span, accused)
                if entry.role == "island"
                else _auditor(conn, run_id, entry.hotkey, span)
            )
            rows.setdefault((entry.role, entry.strategy), _Tally()).add(entry.hotkey, counts)
    return [_row(role, strategy, rows[(role, strategy)]) for role, strategy in sorted(rows)]


def _row(role: str, strategy: str, tally: _Tally) -> HoneypotRow:
    counts = dict(tally.counts)
    if role == "island":
        if strategy == "honest":  # a fault of an honest island is a false positive
            counts["false_positives"] = counts.pop("caught")
        else:
            counts["missed"] = counts["rounds_run"] - counts["caught"]
    return HoneypotRow.model_validate(
        {"role": role, "strategy": strategy, "hotkeys": len(tally.hotkeys), **counts}
    )


def _island(
    conn: sqlite3.Connection,
    run_id: str,
    hotkey: str,
    span: tuple[int, int],
    accused: dict[int, dict[str, str]],
) -> dict[str, int]:
    record = audit_storage.island_span(conn, run_id, hotkey, *span)
    games = game_storage.outcomes_in_span(conn, run_id, "island", hotkey, span)
    return {
        "rounds_run": record.rounds_run,
        "audited": record.audited,
        "caught": sum(1 for i, hit in accused.items() if span[0] <= i <= span[1] and hotkey in hit),
        "disputes_won": games.overturned,
        "disputes_lost": games.upheld,
    }


def _auditor(
    conn: sqlite3.Connection, run_id: str, hotkey: str, span: tuple[int, int]
) -> dict[str, int]:
    games = game_storage.outcomes_in_span(conn, run_id, "auditor", hotkey, span)
    return {
        "verdicts": verdict_storage.verdicts_signed(conn, run_id, hotkey, *span),
        "disputes_lost": games.overturned,
        "disputes_won": games.upheld,
    }


def _compact(value: object) -> str:
    """Compact sorted JSON of the revealed list, as stored (the state's ``quick_dumps``)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _final(conn: sqlite3.Connection, run_id: str, index: int) -> bool:
    row = rounds_storage.round_state(conn, run_id, index)
    return row is not None and row.phase == "final"


def _public(row: honeypot_storage.PeriodRow) -> HoneypotPeriodPublic:
    text = row.list_json
    return HoneypotPeriodPublic(
        period=row.period,
        first_round=row.first_round,
        last_round=row.last_round,
        commitment=row.commitment,
        committed_beacon_round=row.committed_beacon_round,
        revealed=None if text is None else HoneypotList.model_validate_json(text),
        revealed_beacon_round=row.revealed_beacon_round,
    )
