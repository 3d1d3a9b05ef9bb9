"""Island utilisation across the whole run, from the service's own records (docs/devnet.md).

The service cannot see an island's devices, but its records are a public clock that no
island reports on itself: the beacon round each round opened at, the one each island's
commit was accepted at, the beacon round that selected the audits, the verdicts' and the
merge tape's arrivals, and the next round's opening. Per finished round (its next round
opened) and island on its roster, the wall time from the round's opening to the next
round's is cut at those records, in the order an island meets them:

* ``busy``: opening to the island's accepted commit. An upper bound of compute: the
  island's download of the start model and its preparation are in it. Under overlapped
  rounds an island that committed the next round may have trained it from this round's
  audit selection on, so that span is busy too (it then waits only for the deadline and
  the beacon round);
* ``deadline``: to the commit phase's close (the beacon round before the selecting one:
  the deadline, or the last awaited island's commit);
* ``beacon``: to the beacon round that selected the audits;
* ``audit``: to the audit phase's end: the last verdict received in the audit window once
  every assignment had one, else the window's end (the selection when none was audited);
* ``merge``: to the merge tape's arrival;
* ``open``: to the next round's opening (the witnesses, the operator);
* ``missed``: a whole round the island was on the roster of and did not commit in.

A boundary the service did not record joins its cause to the next (``audit+merge``), never
a silent zero; a figure that cannot be computed is None. Busy plus every wait is the wall
time. Times are beacon rounds (seconds: times the beacon period), so early by up to one
period. The devnet's own report (``hypertrain.devnet.utilisation``) measures compute from
the islands' log lines instead, and cuts the waits the same way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

from hypertrain.challenge.dashboard.models import UtilisationPanel, UtilisationRow
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.store import (
    audit_storage,
    commit_storage,
    rounds_storage,
    verdict_storage,
)
from hypertrain.protocol.timeline import fold

# in the order an island meets them between its commit and the next round's opening
CAUSES: Final = ("deadline", "beacon", "audit", "merge", "open", "missed")
BUSY_WORDS: Final = (
    "busy: from the round's opening to the island's accepted commit, an upper bound of its"
    " compute (the start model's download and the round's preparation are in it; with"
    " overlapped rounds, also from the audit selection to the next round it committed)"
)

Piece = tuple[str, int]  # a cause ("busy", a cause of CAUSES or joined ones) and beacon rounds


@dataclass(frozen=True, slots=True)
class RoundClock:
    """A finished round's boundaries in beacon rounds (None: not recorded)."""

    round: int
    opened: int
    closed: int | None  # the commit phase's close
    selected: int | None  # the beacon round that selected the audits
    audited: int | None  # the audit phase's end
    merged: int | None  # the merge tape's arrival
    next_opened: int
    roster: frozenset[str]
    accepted: Mapping[str, int]  # island -> the beacon round its commit was accepted at
    # overlapped rounds: islands that committed the next round, so could train it ahead
    # from this round's selection on
    ahead: frozenset[str] = frozenset()


def island_round(clock: RoundClock, hotkey: str) -> list[Piece]:
    """One island's round: busy then each wait, or the whole round missed."""
    opened, end = clock.opened, clock.next_opened
    accepted = clock.accepted.get(hotkey)
    if accepted is None:
        return [("missed", end - opened)]
    busy = min(max(accepted, opened), end)
    marks = [
        ("deadline", clock.closed),
        ("beacon", clock.selected),
        ("audit", clock.audited),
        ("merge", clock.merged),
        ("open", end),
    ]
    if hotkey in clock.ahead and clock.selected is not None:  # the next round, trained ahead
        ahead = min(max(clock.selected, busy), end)
        return [("busy", busy - opened), *fold(busy, ahead, marks[:2]), ("busy", end - ahead)]
    return [("busy", busy - opened), *fold(busy, end, marks)]


def audit_end(
    selected: int | None,
    close: int | None,
    merged: int | None,
    assigned: frozenset[str],
    verdicts: Sequence[tuple[str, int]],
) -> int | None:
    """When the audit phase ended: the last verdict (island, beacon round) received in the
    window (selection to its close or the merge) once every assignment had one, else the
    window's close; the selection itself when nothing was audited (None: not recorded)."""
    if selected is None:
        return None
    if not assigned:
        return selected
    bounds = [b for b in (close, merged) if b is not None]
    bound = min(bounds) if bounds else None
    seen = [(h, t) for h, t in verdicts if t >= selected and (bound is None or t <= bound)]
    if seen and assigned <= {h for h, _ in seen}:
        return max(t for _, t in seen)
    return close


def round_clocks(state: ServiceState, run_id: str) -> list[RoundClock]:
    """Every finished round's boundaries, from the service's records only."""
    conn = state.conn
    rows = rounds_storage.rounds(conn, run_id)
    timing = rounds_storage.timing(conn, run_id)
    accepted = commit_storage.accepted_rounds(conn, run_id)
    assigned: dict[int, set[str]] = defaultdict(set)
    for a in audit_storage.audits(conn, run_id):
        assigned[a.round].add(a.hotkey)
    verdicts: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for v in verdict_storage.standing_verdicts(conn, run_id):
        verdicts[v.round].append((v.hotkey, v.received))
    overlap = state.manifest(run_id).round.overlap
    out = []
    for row, nxt in pairwise(rows):
        selected, merged = row.selection_beacon_round, timing[row.round].merged
        envelope = rounds_storage.open_envelope(conn, run_id, row.round)
        out.append(
            RoundClock(
                round=row.round,
                opened=row.open_beacon_round,
                closed=None if selected is None else selected - 1,
                selected=selected,
                audited=audit_end(
                    selected,
                    row.audit_close_round,
                    merged,
                    frozenset(assigned[row.round]),
                    verdicts[row.round],
                ),
                merged=merged,
                next_opened=nxt.open_beacon_round,
                roster=frozenset()
                if envelope is None
                else state.roster_of(run_id, row.round, envelope),
                accepted=accepted.get(row.round, {}),
                ahead=frozenset(accepted.get(nxt.round, {})) if overlap else frozenset(),
            )
        )
    return out


def _order(cause: str) -> tuple[int, int]:
    parts = [CAUSES.index(p) if p in CAUSES else len(CAUSES) for p in cause.split("+")]
    return parts[0], parts[-1]


def utilisation_row(
    hotkey: str | None, name: str, rounds: Sequence[list[Piece]], period_s: int
) -> UtilisationRow:
    """The sum of an island's rounds (or every island's), in seconds."""
    busy, waits, wall = 0, defaultdict[str, int](int), 0
    committed = 0
    for pieces in rounds:
        committed += any(cause == "busy" for cause, _ in pieces)
        for cause, n in pieces:
            wall += n
            if cause == "busy":
                busy += n
            else:
                waits[cause] += n
    if not rounds:
        return UtilisationRow(hotkey=hotkey, name=name, rounds=0, committed=0, wall_s=None,
                              busy_s=None, busy=None, waiting_s={}, waiting_share={})  # fmt: skip
    order = sorted(waits, key=_order)
    return UtilisationRow(
        hotkey=hotkey,
        name=name,
        rounds=len(rounds),
        committed=committed,
        wall_s=wall * period_s,
        busy_s=busy * period_s,
        busy=round(busy / wall, 4) if wall else None,
        waiting_s={c: waits[c] * period_s for c in order},
        waiting_share={c: round(waits[c] / wall, 4) for c in order} if wall else {},
    )


def panel(
    state: ServiceState, run_id: str, period_s: int, names: Mapping[str, str]
) -> UtilisationPanel:
    """The utilisation panel: every island on a finished round's roster (in the order of
    ``names``, hotkey to island name, then the others) and all of them together."""
    clocks = round_clocks(state, run_id)
    per: dict[str, list[list[Piece]]] = defaultdict(list)
    for clock in clocks:
        for hotkey in sorted(clock.roster):
            per[hotkey].append(island_round(clock, hotkey))
    order = [h for h in names if h in per] + sorted(h for h in per if h not in names)
    islands = [
        utilisation_row(h, names.get(h, f"{h[:6]}…{h[-4:]}"), per[h], period_s) for h in order
    ]
    together = utilisation_row(None, "all islands", [p for h in order for p in per[h]], period_s)
    causes = sorted({c for row in [together, *islands] for c in row.waiting_s}, key=_order)
    return UtilisationPanel(
        rounds=len(clocks),
        period_s=period_s,
        causes=causes,
        busy_words=BUSY_WORDS,
        all=together,
        islands=islands,
    )
