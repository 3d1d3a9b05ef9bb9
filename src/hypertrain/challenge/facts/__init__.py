"""The facts the service publishes, each read in one place and derived by one rule.

The standing verdict of an audit (:func:`standing_verdicts`: the one query
:data:`~hypertrain.challenge.store.verdict_storage.STANDING_SQL`, then the late panels'
majority, :func:`~hypertrain.challenge.rule.late_standing`), a round's outcome
(:func:`round_outcome`, the pure :func:`~hypertrain.challenge.rule.decide` over typed
rows) and an island's accusations (:func:`run_accusations`, the rounds whose outcome
faults it; :func:`accused_before`, the islands an earlier round accused) are defined here
only.

Two words, never one: an island is *accused* in a round the settlement rule faults it in
on a standing verdict (:func:`run_accusations`; a dispute may still overturn it while the
round is not final), and its fault is *proven* once booked (:func:`proven_faults`: the
rows ``GET /faults`` lists, its value burned). :func:`fault_records` holds both per
island for the roster, the summary and the dashboard.
Settlement, the audit selection, the commit phase's pace, the public views (roster, rounds,
summary), the dashboard and the honeypot table all read them from here, so they cannot
disagree.

The package sits above the store and below settlement and every resource; beside these
facts it holds the run's jury (:mod:`.jury`), each key's role (:mod:`.roles`) and where
the service stands in time (:mod:`.progress`: the next round to open, a verified beacon
round).
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field

from pydantic import ValidationError

from hypertrain.challenge import rule
from hypertrain.challenge.errors import UnavailableError
from hypertrain.challenge.rule import (
    CommitRow,
    Outcome,
    StandingVerdict,
    decide,
)
from hypertrain.challenge.store import (
    audit_storage,
    commit_storage,
    late_panel_storage,
    merge_storage,
    roster_storage,
    verdict_storage,
)
from hypertrain.challenge.tape_rule import TapeWitnesses
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import MergeTape


class CorruptRecordError(UnavailableError):
    """A stored record the service wrote no longer parses (refuse, never guess)."""


@dataclass(frozen=True)
class RoundInputs:
    """Everything :func:`~hypertrain.challenge.rule.decide` needs for one round."""

    commits: list[CommitRow]
    tape: MergeTape | None
    verdicts: list[StandingVerdict]
    assigned: frozenset[str]
    probation: dict[str, int]
    earlier: frozenset[str] = frozenset()  # an earlier round's audit of them is unproven
    proven: dict[str, str] = field(default_factory=dict)  # a proven earlier fault of them
    witnesses: TapeWitnesses | None = None  # the tape's witnesses (None: none required)

    def outcome(self) -> Outcome:
        return decide(
            self.commits,
            self.tape,
            self.verdicts,
            self.assigned,
            self.probation,
            self.earlier,
            self.proven,
            self.witnesses,
        )


def standing_verdicts(
    conn: sqlite3.Connection, run_id: str, index: int | None = None
) -> list[StandingVerdict]:
    """The run's verdicts (or one round's) with their standing, by round and verdict id."""
    verdicts = verdict_storage.standing_verdicts(conn, run_id, index)
    panels = [
        rule.LatePanel(p.round, p.hotkey, p.opened_beacon_round, frozenset(p.jury))
        for p in late_panel_storage.late_panels(conn, run_id, index)
    ]
    return rule.standing(verdicts, panels)


def judged(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """Hotkeys of the round with a verdict that judged their audit (not set aside)."""
    return frozenset(v.hotkey for v in standing_verdicts(conn, run_id, index) if v.judged)


def unjudged(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """The round's assigned hotkeys still waiting for a judging verdict."""
    assigned = audit_storage.assigned(conn, run_id, index)
    return rule.unjudged(assigned, standing_verdicts(conn, run_id, index))


def undecided(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """The round's assigned hotkeys no majority decided yet: unjudged, or split."""
    split = frozenset(
        v.hotkey for v in standing_verdicts(conn, run_id, index) if v.standing == "split"
    )
    return unjudged(conn, run_id, index) | split


def parse_tape(body: str) -> MergeTape:
    """A stored merge-tape body as its model (it validated when it was accepted)."""
    try:
        return MergeTape.model_validate_json(body)
    except ValidationError as exc:
        raise CorruptRecordError(
            f"a stored merge tape does not parse: {exc}", code="corrupt"
        ) from exc


def merge_tape(conn: sqlite3.Connection, run_id: str, index: int) -> MergeTape | None:
    body = merge_storage.merge_body(conn, run_id, index)
    return None if body is None else parse_tape(body)


def earlier_audits(
    conn: sqlite3.Connection, run_id: str, index: int
) -> tuple[frozenset[str], dict[str, str]]:
    """Before round ``index``: the hotkeys whose audit is unproven (no judging verdict,
    or a fault that may still change), and those with a proven fault (with its reason)."""
    assigned = audit_storage.assigned_before(conn, run_id, index)
    verdicts = standing_verdicts(conn, run_id)
    return rule.earlier_unproven(index, assigned, verdicts), rule.earlier_faults(index, verdicts)


def probation_holds(conn: sqlite3.Connection, run_id: str, index: int) -> dict[str, int]:
    """hotkey -> the hold of its reward, for each island still in probation at round
    ``index``: its release round once its probation is served, else
    :data:`~hypertrain.challenge.rule.PROBATION_HOLD` (:func:`rule.probation_holds`)."""
    islands = roster_storage.probation_records(conn, run_id, index)
    if not islands:
        return {}
    end = max(p.until for p in islands.values())
    assigned = audit_storage.assigned_before(conn, run_id, end)
    return rule.probation_holds(islands, assigned, standing_verdicts(conn, run_id))


def round_inputs(conn: sqlite3.Connection, run_id: str, index: int) -> RoundInputs:
    """One round's commits, tape, standing verdicts, assignments, probation holds and the
    islands an earlier round's unproven audit holds."""
    commits = commit_storage.round_commits(conn, run_id, index)
    assigned = frozenset(audit_storage.assigned(conn, run_id, index))
    probation = probation_holds(conn, run_id, index)
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


def accused_before(conn: sqlite3.Connection, run_id: str, index: int) -> frozenset[str]:
    """Hotkeys that a round before ``index`` accused: a standing fault verdict
    (:func:`~hypertrain.challenge.rule.verdict_faults`, the faults of
    :func:`round_outcome` and :func:`run_accusations`). One read of the verdicts, no tapes."""
    verdicts = standing_verdicts(conn, run_id)
    return frozenset(rule.verdict_faults(v for v in verdicts if v.round < index))


def run_accusations(conn: sqlite3.Connection, run_id: str) -> dict[int, dict[str, str]]:
    """round -> hotkey -> fault reason of every island the round's outcome faults (an
    accusation, disputable while the round is not final), for every round of the run
    (three reads in all)."""
    commits = commit_storage.run_commits(conn, run_id)
    tapes = {
        index: parse_tape(body) for index, body in merge_storage.tape_bodies(conn, run_id).items()
    }
    verdicts: dict[int, list[StandingVerdict]] = defaultdict(list)
    for v in standing_verdicts(conn, run_id):
        verdicts[v.round].append(v)
    return {
        index: decide(rows, tapes.get(index), verdicts[index]).faults
        for index, rows in sorted(commits.items())
    }


def proven_faults(conn: sqlite3.Connection, run_id: str) -> frozenset[tuple[int, str]]:
    """(round, hotkey) of every proven fault of the run: booked (and burned) by settlement
    or a late verdict, the rows ``GET /v1/runs/{run}/faults`` lists."""
    return frozenset((f.round, f.hotkey) for f in merge_storage.proven_faults(conn, run_id))


def stored_carries(
    conn: sqlite3.Connection, manifest: RunManifest, run_id: str, index: int
) -> frozenset[str]:
    """Hotkeys whose round ``index - 1`` final state an auditor replayed, matched and
    stored on the relay before posting its verdict under ``carry``: a standing ``match``
    that replayed the final segment (``update_checked``) and no standing fault there.
    Round ``index``'s audits find that state on the relay, so the island need not upload
    it (it still does when the relay lacks it: ``miner.checkpoints.upload_selected``)."""
    if index == 0 or manifest.inner.state_policy != "carry":
        return frozenset()
    verdicts = standing_verdicts(conn, run_id, index - 1)
    final = {
        verdict_id
        for verdict_id, envelope in verdict_storage.verdict_envelopes(conn, run_id, index - 1)
        if json.loads(envelope).get("body", {}).get("update_checked") is True
    }
    matched = {
        v.hotkey
        for v in verdicts
        if v.standing == "stands" and v.result == "match" and v.verdict_id in final
    }
    return frozenset(matched - set(rule.verdict_faults(verdicts)))


@dataclass(frozen=True, slots=True)
class FaultRecord:
    """One island's faults by how far they got."""

    accused: int  # rounds the settlement rule faults it in (a standing fault verdict)
    proven: int  # rounds whose fault is proven (booked and burned)


def fault_records(
    run: dict[int, dict[str, str]], proven: frozenset[tuple[int, str]]
) -> dict[str, FaultRecord]:
    """hotkey -> its :class:`FaultRecord`, from :func:`run_accusations`' answer ``run`` and
    :func:`proven_faults`' ``proven`` (an island with neither is absent)."""
    accused = accusation_counts(run)
    booked: dict[str, int] = {}
    for _, hotkey in proven:
        booked[hotkey] = booked.get(hotkey, 0) + 1
    return {
        hotkey: FaultRecord(accused.get(hotkey, 0), booked.get(hotkey, 0))
        for hotkey in sorted(set(accused) | set(booked))
    }


def accusation_counts(run: dict[int, dict[str, str]]) -> dict[str, int]:
    """hotkey -> how many rounds of :func:`run_accusations`' answer ``run`` accuse it."""
    out: dict[str, int] = {}
    for accused in run.values():
        for hotkey in accused:
            out[hotkey] = out.get(hotkey, 0) + 1
    return out
