"""Island compute utilisation: the share of wall time an island spends computing, and
what it waits for the rest of the time (docs/devnet.md).

An island computes from its ``round_start`` event to its ``uploaded`` event, and, under
overlapped rounds, the steps it trained ahead of a round's open and the round adopted
(:mod:`hypertrain.devnet.island_marks`). Per round (:func:`utilisation`): mean island compute over
the round's wall time (open to next open; the last round: until seen final). Over the whole
run (:func:`whole_run`): an island's wall time, first ``round_start`` to last ``uploaded``
(or the run's end), cut into ``compute`` and waits by cause (:data:`CAUSES`) at the
service's round records, the auditors' ``verdict`` events and the island's own events. A
boundary not recorded joins its cause to the next (``audit+merge``), never a silent zero;
service times are beacon rounds, so early by up to a period. Under overlapped rounds an
island waits between its upload and its next round's steps only for the deadline and the
beacon round (then ``notice`` and ``prepare``), and between those steps and the round's
open for ``open``. Invariant: per island, compute plus every wait equals its wall time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from hypertrain.devnet.island_marks import RoundMarks, compute_seconds, events, island_rounds
from hypertrain.protocol.timeline import fold

# in the order an island meets them between its upload and its next round_start
CAUSES: Final = (
    "deadline",  # until the commit phase closed (its deadline, or every island committed)
    "beacon",  # until the beacon round that selects the audits was out
    "audit",  # until the last verdict of the round (or the audit window's end)
    "merge",  # until the service received the merge tape
    "open",  # until the next round opened (the tape's witness, the aggregator); trained
    # ahead: from the steps to the round's open (the previous round's audits and merge)
    "missed",  # whole rounds the island did not train in (skipped, crashed, restarted)
    "notice",  # until the island saw the open round (its poll)
    "prepare",  # round records verified, samples loaded
    "download",  # the start model fetched (or rebuilt from the broadcast) and verified
    "unfinished",  # training that reached no upload (a crash, a failed rank, the run's end)
)


@dataclass(frozen=True, slots=True)
class RoundClock:
    """When the service moved a round on (Unix seconds; None: not recorded)."""

    opened: float
    commits_closed: float | None
    selected: float | None
    audited: float | None
    merged: float | None


@dataclass(frozen=True, slots=True)
class Segment:
    round: int  # the round whose start (or upload) the segment follows
    cause: str  # "compute", a cause of CAUSES, or causes joined by "+"
    seconds: float


def round_walls(rounds: list[dict[str, Any]], finished_at: Mapping[int, float]) -> dict[int, float]:
    """Wall seconds per final round: open to next open, or open to when it was seen final."""
    opens = {r["round"]: float(r["started_unix"]) for r in rounds}
    out: dict[int, float] = {}
    for r in rounds:
        index = r["round"]
        end = opens.get(index + 1, finished_at.get(index))
        if r["phase"] == "final" and end is not None and end > opens[index]:
            out[index] = end - opens[index]
    return out


def utilisation(
    walls: Mapping[int, float], compute: Mapping[str, Mapping[int, float]]
) -> dict[str, Any]:
    """Per round and overall: mean island compute seconds, wall seconds and their ratio."""
    per_round = []
    for index, wall in sorted(walls.items()):
        seconds = [c[index] for c in compute.values() if index in c]
        if not seconds:
            continue
        mean = sum(seconds) / len(seconds)
        per_round.append(
            {
                "round": index,
                "wall_s": round(wall, 2),
                "compute_s": round(mean, 2),
                "utilisation": round(mean / wall, 4),
            }
        )
    wall_total = sum(r["wall_s"] for r in per_round)
    compute_total = sum(r["compute_s"] for r in per_round)
    return {
        "per_round": per_round,
        "mean": round(compute_total / wall_total, 4) if wall_total else None,
        "compute_s": round(compute_total / len(per_round), 2) if per_round else None,
        "wall_s": round(wall_total / len(per_round), 2) if per_round else None,
    }


def _times(events: Iterable[dict[str, Any]], event: str, role: str = "") -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for doc in events:
        if doc.get("event") == event and (not role or doc.get("role") == role):
            out.setdefault(doc["round"], []).append(float(doc["ts"]))
    return out


def _closed(r: Mapping[str, Any], at: Callable[[int], float], last: float | None) -> float | None:
    """When the commit phase closed: at the ``last`` commit when every awaited island had
    committed (the selection is then the beacon round after it), else when the deadline
    passed (the selecting beacon round is then due at once)."""
    selection, deadline = r.get("selection_beacon_round"), r.get("commit_deadline_round")
    if selection is None or deadline is None:
        return None
    if selection - 1 < deadline or (last is not None and last >= at(deadline)):
        low = at(selection - 1)
        return low if last is None else min(max(last, low), at(selection))
    return at(selection)


def _audit_end(
    verdicts: Sequence[float], selected: float, window: float | None, merged: float | None
) -> float | None:
    """When the audit phase closed: at the last verdict before the window's end and the
    merge's beacon round (a juror's late re-audit ended no wait), else at the window's end
    if every verdict came after it (None: no verdict seen)."""
    bound = min(math.inf if window is None else window, math.inf if merged is None else merged)
    judged = [t for t in verdicts if selected <= t <= bound]
    return max(judged) if judged else window if verdicts else None


def round_clock(
    r: Mapping[str, Any], period_s: float, last_commit: float | None, verdicts: Sequence[float]
) -> RoundClock:
    """One dashboard round's timeline; ``last_commit`` is the latest ``committed`` event of
    the round (islands), ``verdicts`` the times of its auditors' ``verdict`` events."""
    opened = float(r["started_unix"])

    def at(beacon_round: int) -> float:
        return opened + (beacon_round - int(r["open_beacon_round"])) * period_s

    selection, close = r.get("selection_beacon_round"), r.get("audit_close_round")
    selected = None if selection is None else at(selection)
    compute, sync = r.get("compute_s"), r.get("sync_s")
    merged = None if compute is None or sync is None else opened + compute + sync
    audited = None
    if selected is not None and r.get("audits") == 0:
        audited = selected  # nothing to audit: the phase closes at selection
    elif selected is not None:
        late = None if merged is None else merged + period_s  # received within its beacon round
        audited = _audit_end(verdicts, selected, None if close is None else at(close), late)
    return RoundClock(opened, _closed(r, at, last_commit), selected, audited, merged)


def service_clocks(
    doc: Mapping[str, Any], island_lines: Mapping[str, Sequence[str]], other_lines: Iterable[str]
) -> dict[int, RoundClock]:
    """Every dashboard round's timeline, with the islands' last ``committed`` and the
    auditors' last ``verdict`` event of each round."""
    commits = _times(events(x for lines in island_lines.values() for x in lines), "committed")
    verdicts = _times(events(other_lines), "verdict", "auditor")
    period = float(doc.get("beacon", {}).get("period_s", 1))
    out = {}
    for r in doc["rounds"]:
        last_commit = max(commits.get(r["round"], []), default=None)
        out[r["round"]] = round_clock(r, period, last_commit, verdicts.get(r["round"], []))
    return out


def _fold(
    index: int, cursor: float, end: float, marks: Sequence[tuple[str, float | None]]
) -> list[Segment]:
    """:func:`hypertrain.protocol.timeline.fold` as the round's segments."""
    return [Segment(index, cause, s) for cause, s in fold(cursor, end, marks)]


def _service_waits(c: RoundClock | None, opened: float | None) -> list[tuple[str, float | None]]:
    """The service's boundaries after an upload: each cause and when its wait ended."""
    ends = (None,) * 4 if c is None else (c.commits_closed, c.selected, c.audited, c.merged)
    return [*zip(CAUSES[:4], ends, strict=True), ("open", opened)]


def _computed(index: int, m: RoundMarks, clocks: Mapping[int, RoundClock]) -> list[Segment]:
    """An uploaded round's compute, and what was lost or waited inside it: a restart's
    lost work; for steps trained ahead, the wait from them to the round's open."""
    first = m.compute_start if m.ahead is None else m.ahead[0]
    out = [Segment(index, "unfinished", first - m.start)] if first > m.start else []
    if m.ahead is not None:
        own = clocks.get(index)
        marks = [("open", None if own is None else own.opened), ("notice", m.opened_seen),
                 ("prepare", m.fetch), ("download", m.compute_start)]  # fmt: skip
        out.append(Segment(index, "compute", m.ahead[1] - m.ahead[0]))
        out += _fold(index, m.ahead[1], m.compute_start, marks)
    assert m.uploaded is not None
    return [*out, Segment(index, "compute", m.uploaded - m.compute_start)]


def _gap(
    index: int, m: RoundMarks, after: tuple[int, RoundMarks] | None,
    clocks: Mapping[int, RoundClock], run_end: float,
) -> list[Segment]:  # fmt: skip
    """Round ``index`` of one island, from its first round_start until its next round's
    (``after``) first round_start, or until its upload or the run's end when last. A next
    round trained ahead starts once this one's audits are selected."""
    out: list[Segment] = []
    opened = clocks[index + 1].opened if index + 1 in clocks else None
    if m.uploaded is not None:
        out += _computed(index, m, clocks)
        if after is None:
            return out
        waits, cursor = _service_waits(clocks.get(index), opened), m.uploaded
        if after[0] == index + 1 and after[1].started_ahead:
            waits = waits[:2]  # deadline, beacon: the next round starts at the selection
    else:
        if after is None:
            return [Segment(index, "unfinished", max(run_end, m.start) - m.start)]
        waits, cursor = [("unfinished", opened)], m.start
    nxt, n = after
    if nxt > index + 1:
        waits.append(("missed", clocks[nxt].opened if nxt in clocks else None))
    if n.started_ahead:
        waits += [("notice", n.seen), ("prepare", n.start)]
    else:
        waits += [("notice", n.seen), ("prepare", n.fetch), ("download", n.start)]
    return out + _fold(index, cursor, n.start, waits)


def island_segments(
    marks: Mapping[int, RoundMarks], clocks: Mapping[int, RoundClock], run_end: float | None
) -> list[Segment]:
    """Every second of one island's wall time, as compute or a wait by cause."""
    started = sorted(marks.items())
    times = [t for m in marks.values() for t in (m.compute_start, m.uploaded) if t is not None]
    end = run_end if run_end is not None else max(times, default=0.0)  # else its last mark
    nexts: list[tuple[int, RoundMarks] | None] = [*started[1:], None]
    return [s for (i, m), after in zip(started, nexts, strict=True)
            for s in _gap(i, m, after, clocks, end)]  # fmt: skip


def opened_rounds(
    marks: Mapping[int, RoundMarks], clocks: Mapping[int, RoundClock]
) -> dict[int, RoundMarks]:
    """The rounds of an island's marks that were opened: a round trained ahead that never
    opened (the run ended first) is not part of its wall time."""
    return {i: m for i, m in marks.items() if i in clocks or not m.started_ahead}


def island_notes(marks: Mapping[int, RoundMarks], last_round: int | None) -> list[str]:
    """What makes an island's figures partial, in words (empty: complete)."""
    notes, indices = [], sorted(marks)
    if not indices:
        return ["no round started"]
    for index in indices:
        m = marks[index]
        if m.uploaded is None:
            notes.append(f"round {index}: started, no upload (crashed, or the run ended first)")
        elif (first := m.compute_start if m.ahead is None else m.ahead[0]) > m.start:
            lost = "trained ahead, not adopted" if m.started_ahead else "restarted"
            notes.append(f"round {index}: {lost}, {first - m.start:.1f} s lost")
    top = max(indices[-1], -1 if last_round is None else last_round)
    missed = [str(i) for i in range(indices[0], top + 1) if i not in marks]
    return notes + (["rounds not started: " + ", ".join(missed)] if missed else [])


def _add(pairs: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Seconds summed by cause, in the order of :data:`CAUSES` (a joined cause by its first)."""
    out: dict[str, float] = {}
    for cause, seconds in pairs:
        out[cause] = out.get(cause, 0.0) + seconds
    order = {c: i for i, c in enumerate(CAUSES)}
    return dict(sorted(out.items(), key=lambda kv: order.get(kv[0].split("+")[0], len(CAUSES))))


def summary(islands: Sequence[Sequence[Segment]], from_round: int = 0) -> dict[str, Any]:
    """Islands' segments of rounds ``>= from_round`` together: compute over wall
    (``utilisation``), the mean of each island's own ratio, per-round means (over rounds
    with an upload) and each wait's seconds and share of the wall time, by cause."""
    kept = [[s for s in segments if s.round >= from_round] for segments in islands]
    flat = [s for segments in kept for s in segments]
    compute = sum(s.seconds for s in flat if s.cause == "compute")
    wall = sum(s.seconds for s in flat)
    # island-rounds with compute (a round trained ahead has two compute pieces)
    rounds = sum(len({s.round for s in k if s.cause == "compute"}) for k in kept)
    waiting = _add([(s.cause, s.seconds) for s in flat if s.cause != "compute"])
    walls = [(sum(s.seconds for s in k if s.cause == "compute"), sum(s.seconds for s in k))
             for k in kept]  # fmt: skip
    ratios = [c / w for c, w in walls if w]
    return {
        "rounds": rounds,
        "compute_s": round(compute, 3),
        "wall_s": round(wall, 3),
        "utilisation": round(compute / wall, 4) if wall else None,
        "mean_utilisation": round(sum(ratios) / len(ratios), 4) if ratios else None,
        "compute_s_per_round": round(compute / rounds, 2) if rounds else None,
        "wall_s_per_round": round(wall / rounds, 2) if rounds else None,
        "waiting_s": {c: round(v, 3) for c, v in waiting.items()},
        "waiting_share": {c: round(v / wall, 4) for c, v in waiting.items()} if wall else {},
    }


def steady_from(audits: Iterable[Mapping[str, Any]], hotkeys: Collection[str]) -> tuple[int, str]:
    """The first round after every one of ``hotkeys``' probation audits, and on what basis
    (round 1 when no audit of theirs says whether it was a probation audit)."""
    seen = [a for a in audits if a.get("hotkey") in hotkeys and "probation" in a]
    if not seen:
        return 1, "probation not visible"
    last = max((int(a["round"]) for a in seen if a["probation"]), default=-1)
    return last + 1, "after probation"


def whole_run(
    doc: Mapping[str, Any],
    island_lines: Mapping[str, Sequence[str]],
    other_lines: Iterable[str] = (),
    *,
    hotkeys: Mapping[str, str] | None = None,
    honest: Collection[str] | None = None,
    run_end: float | None = None,
) -> dict[str, Any]:
    """Whole-run utilisation and waits per island (by name), for the ``honest`` ones
    (default: all) together (``run``), and from the first round after probation (``steady``).

    ``doc``: the dashboard document (rounds, audits, beacon period); ``other_lines``: the
    other roles' event lines (auditors' ``verdict`` events time the audits); ``hotkeys``:
    island names to hotkeys (to find their probation audits)."""
    clocks = service_clocks(doc, island_lines, other_lines)
    marks = {name: opened_rounds(island_rounds(lines), clocks)
             for name, lines in sorted(island_lines.items())}  # fmt: skip
    honest = set(island_lines if honest is None else honest)
    names = hotkeys or {}
    first, basis = steady_from(doc.get("audits", []), {names[n] for n in honest if n in names})
    last_round = max((r["round"] for r in doc["rounds"] if r["phase"] == "final"), default=None)
    islands, counted = {}, []
    for name, m in marks.items():
        segs, notes = island_segments(m, clocks, run_end), island_notes(m, last_round)
        adopted = sum(x.ahead is not None for x in m.values())  # rounds trained ahead
        islands[name] = {**summary([segs]), "honest": name in honest, "complete": not notes,
                         "notes": notes, "adopted": adopted,
                         "steady": summary([segs], first)}  # fmt: skip
        counted += [segs] if name in honest else []
    return {
        "islands": islands,
        "run": {"islands": len(counted), **summary(counted)},
        "steady": {"from_round": first, "basis": basis, "islands": len(counted),
                   **summary(counted, first)},
    }  # fmt: skip


def run_utilisation(
    doc: Mapping[str, Any],
    finished_at: Mapping[int, float],
    logs: Mapping[str, Sequence[str]],
    *,
    hotkeys: Mapping[str, str],
    honest: Collection[str],
) -> dict[str, Any]:
    """The report's ``utilisation``: per round (:func:`utilisation`, every island) and the
    whole run (:func:`whole_run`), from every child's log lines (by child name)."""
    island_lines = {name: logs[name] for name in hotkeys if name in logs}
    compute = {name: compute_seconds(lines) for name, lines in island_lines.items()}
    walls = round_walls(list(doc["rounds"]), finished_at)
    others = (line for name, lines in logs.items() if name not in hotkeys for line in lines)
    end = max(finished_at.values(), default=None)
    return {
        **utilisation(walls, compute),
        **whole_run(doc, island_lines, others, hotkeys=hotkeys, honest=honest, run_end=end),
    }
