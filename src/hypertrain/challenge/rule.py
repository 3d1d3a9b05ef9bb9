"""The settlement rule as a pure function: who of a round's commits is paid, held, faulted.

:func:`decide` sees only typed values (the round's commits, its merge tape parsed into
:class:`~hypertrain.protocol.messages.MergeTape`, the *standing* verdicts, the audit
assignments and the probation ends) and touches no database or ledger, so the rule is
tested as a table of cases and every view that publishes a fault derives it from the
same call (:mod:`hypertrain.challenge.facts`). For each commit:

* **faulted** when a standing verdict for it is not ``match`` (``mismatch``,
  ``unverifiable``) and the judges' majority supports it (:func:`jury_standing`): a
  fault is proven by a verdict, which its island can dispute, never
  by the merge tape's word (a tape exclusion, ``missing_blob`` or ``malformed`` included,
  only leaves the island unpaid for the round: neither the aggregator nor a relay that
  lost a blob can burn an island's escrow);
* **accepted** (paid by its committed token count) when the tape included it, or
  excluded it for an audit mismatch that no standing verdict supports any more (a
  dispute overturned it: honest work, only too late to merge); an accepted island is
  *held* while an assigned audit has no judging verdict (:data:`PENDING_AUDIT`), while
  an assigned audit of it in an *earlier* round of the run has no judging verdict or a
  standing fault that may still change (:func:`earlier_unproven`; also
  :data:`PENDING_AUDIT`: a fault found late must not let the cheater collect the rounds
  selected before it was known) or while it is in probation (:data:`PROBATION_HOLD`
  until its probation is served, then its release round: :func:`probation_holds`);
* **forfeited** (accepted, held, then burned with everything unvested) when a fault of
  it in an earlier round of the run is *proven* (:func:`earlier_faults`: a standing
  fault verdict that can no longer change). The round's reward is escrowed and burned
  rather than left out of the split, so the result is the same whether the fault was
  proven before this round settled (burned here) or after (the fault's own booking
  burns the held reward): the order in which the events arrive changes nothing;
* **unpaid** otherwise (any other exclusion of the tape, or not in the tape).

Where the operator requires tape witnesses, the round's tape itself is judged first
(:func:`~hypertrain.challenge.tape_rule.tape_status`, the rule's ``witnesses``
input): a tape that is not cleared holds the whole round: the outcome is computed as
always, but nothing of it is booked (:attr:`Outcome.tape`). The tape the round is paid
on must be the tape the witnesses judged.

A verdict *stands* unless a dispute overturned it or it is set aside (another auditor
re-judges the audit: its auditor was found faulty, or a dispute it lost waits for that
independent re-audit). An overturned verdict no longer set aside still judged the
audit; a set-aside one did not, so the island is held until another verdict comes. A
verdict is *held* when its ``recompute`` dispute ended without a quorum while jurors
re-audited ``match`` and none agreed with it: no fault, but the round's reward is held
(never paid on one word, never burned on none). A late verdict on a missed assignment is
*waiting* while fewer than a strict majority of that assignment's late jury judged it
(:func:`late_standing`): it neither faults nor judges, so no first late verdict decides
alone. A fault stands only on the jury's word (:func:`jury_standing`): where the
auditors whose verdicts on an assignment stand disagree, a fault verdict counts only
when a strict majority of them found a fault (or a dispute upheld it); against a strict
majority of ``match`` it is *outvoted* (overturned by the phase's own verdicts: no
fault), and with no majority either way it is *split* (held, as a ``held`` verdict). A
verdict is *final* once nothing can change its standing any more: its round is
final and no late dispute window of its own is open; a final fault is proven.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from hypertrain.challenge.tape_rule import TapeVerdict, TapeWitnesses, tape_status
from hypertrain.protocol.exclusions import AUDIT_EXCLUSIONS
from hypertrain.protocol.messages import MergeTape

# A hold that only a verdict can lift: the escrow's vesting starts at this round.
PENDING_AUDIT: Final = 2**53 - 1
# A hold that only the end of the island's probation can lift (:func:`probation_holds`).
PROBATION_HOLD: Final = 2**53 - 2
HOLDS: Final = frozenset({PENDING_AUDIT, PROBATION_HOLD})  # holds no release round ends

VerdictResult = Literal["match", "mismatch", "unverifiable"]
Standing = Literal["stands", "overturned", "set_aside", "held", "waiting", "outvoted", "split"]


@dataclass(frozen=True, slots=True)
class StandingVerdict:
    """One verdict and whether it still counts."""

    verdict_id: str
    round: int
    hotkey: str
    auditor: str
    result: VerdictResult
    standing: Standing
    final: bool = False  # its round is final and no late window of its own is open
    received: int = 0  # the beacon round it was received at
    upheld: bool = False  # a referee or a re-audit quorum upheld it in a dispute

    @property
    def fault(self) -> bool:
        """A standing verdict other than ``match``: the island is at fault."""
        return self.standing == "stands" and self.result != "match"

    @property
    def proven(self) -> bool:
        """A fault that no dispute, window or re-audit can change any more."""
        return self.fault and self.final

    @property
    def judged(self) -> bool:
        """The verdict decided its audit (not set aside, not waiting for a late quorum)."""
        return self.standing not in ("set_aside", "waiting")

    @property
    def holds(self) -> bool:
        """No quorum decided the verdict (a dispute's, or the judges' own split): hold."""
        return self.standing in ("held", "split")

    def reason(self) -> str:
        return f"{self.result} verdict {self.verdict_id} by {self.auditor}"


@dataclass(frozen=True, slots=True)
class CommitRow:
    hotkey: str
    tokens: int


@dataclass(frozen=True)
class Outcome:
    """What settlement decides for a round's commits."""

    accepted: dict[str, int] = field(default_factory=dict)  # hotkey -> verified tokens
    held: dict[str, int] = field(default_factory=dict)  # accepted hotkey -> release round
    faults: dict[str, str] = field(default_factory=dict)  # hotkey -> reason
    unpaid: dict[str, str] = field(default_factory=dict)  # hotkey -> why it earns nothing
    # accepted and held hotkey -> the earlier proven fault that burns this round's reward
    forfeited: dict[str, str] = field(default_factory=dict)
    # the witnesses' word on the round's tape: nothing is booked unless it is cleared
    tape: TapeVerdict = field(default_factory=TapeVerdict)

    @property
    def pending(self) -> frozenset[str]:
        """Accepted hotkeys whose assigned audit has no judging verdict yet."""
        return frozenset(h for h, until in self.held.items() if until == PENDING_AUDIT)


@dataclass(frozen=True, slots=True)
class LatePanel:
    """A missed assignment's late window: its first late verdict's round and its jury."""

    round: int
    hotkey: str
    opened: int
    jury: frozenset[str]

    @property
    def quorum(self) -> int:
        """A strict majority of the jury (one verdict where no auditor set is known)."""
        return len(self.jury) // 2 + 1

    def on(self, v: StandingVerdict) -> bool:
        return (v.round, v.hotkey) == (self.round, self.hotkey)

    def late(self, v: StandingVerdict) -> bool:
        return (v.round, v.hotkey) == (self.round, self.hotkey) and v.received >= self.opened


def late_standing(
    verdicts: Iterable[StandingVerdict], panels: Iterable[LatePanel]
) -> list[StandingVerdict]:
    """``verdicts`` with each late verdict of a panel short of its quorum ``waiting``.

    A panel's late verdicts count once verdicts from a strict majority of its jury stand
    (an empty jury, no auditor set known: one verdict); until then they judge nothing. A
    juror's verdict from before the panel opened (a split assignment's) is one of them.
    """
    listed, panel_list = list(verdicts), list(panels)
    short: set[tuple[int, str]] = set()
    for p in panel_list:  # its jurors' standing verdicts from before it opened count too
        votes = {v.auditor for v in listed if p.on(v) and v.standing == "stands"}
        if len(votes & p.jury if p.jury else votes) < p.quorum:
            short.add((p.round, p.hotkey))
    waiting = [p for p in panel_list if (p.round, p.hotkey) in short]
    return [
        replace(v, standing="waiting")
        if v.standing == "stands" and any(p.late(v) for p in waiting)
        else v
        for v in listed
    ]


def jury_standing(verdicts: Iterable[StandingVerdict]) -> list[StandingVerdict]:
    """``verdicts`` with each fault verdict that no majority of its judges supports changed.

    The judges of an assignment are the auditors whose verdict on it stands. A fault
    verdict keeps standing when a referee or a quorum of re-audits upheld it in a dispute
    (a dispute lost at a deadline is no such word) or when a strict majority of the
    judges found a fault; it is ``outvoted`` (overturned by the phase's own verdicts: no
    fault, it judged) when a strict majority found ``match``, and ``split`` (held: never
    paid on one word, never burned on none) when no majority exists either way.
    """
    listed = list(verdicts)
    votes: dict[tuple[int, str], list[StandingVerdict]] = {}
    for v in listed:
        if v.standing == "stands":
            votes.setdefault((v.round, v.hotkey), []).append(v)
    changed: dict[str, Standing] = {}
    for judged in votes.values():
        faults = [v for v in judged if v.result != "match"]
        if not faults or any(v.upheld for v in faults) or 2 * len(faults) > len(judged):
            continue
        matches = len(judged) - len(faults)
        new: Standing = "outvoted" if 2 * matches > len(judged) else "split"
        changed.update(dict.fromkeys((v.verdict_id for v in faults), new))
    return [
        replace(v, standing=changed[v.verdict_id]) if v.verdict_id in changed else v for v in listed
    ]


def standing(
    verdicts: Iterable[StandingVerdict], panels: Iterable[LatePanel]
) -> list[StandingVerdict]:
    """The one standing of every verdict: the stored standing, then the late panels'
    majority (:func:`late_standing`), then the judges' majority (:func:`jury_standing`)."""
    return jury_standing(late_standing(verdicts, panels))


def agreeing(verdicts: Iterable[StandingVerdict], keys: Iterable[str]) -> dict[str, int]:
    """hotkey -> the most of ``keys`` whose standing verdicts on it agree (all ``match``,
    or all a fault), by the one standing (:func:`standing`)."""
    listed = frozenset(keys)
    sides: dict[tuple[str, bool], set[str]] = {}
    for v in verdicts:
        if v.auditor in listed and (v.fault or (v.standing == "stands" and v.result == "match")):
            sides.setdefault((v.hotkey, v.fault), set()).add(v.auditor)
    out: dict[str, int] = {}
    for (hotkey, _), auditors in sides.items():
        out[hotkey] = max(out.get(hotkey, 0), len(auditors))
    return out


def verdict_faults(verdicts: Iterable[StandingVerdict]) -> dict[str, str]:
    """hotkey -> reason of its first standing fault verdict (by verdict id)."""
    out: dict[str, str] = {}
    for v in sorted(verdicts, key=lambda v: v.verdict_id):
        if v.fault:
            out.setdefault(v.hotkey, v.reason())
    return out


def unjudged(assigned: Iterable[str], verdicts: Iterable[StandingVerdict]) -> frozenset[str]:
    """Assigned hotkeys with no judging verdict yet (none, or only set-aside ones)."""
    judged = {v.hotkey for v in verdicts if v.judged}
    return frozenset(h for h in assigned if h not in judged)


def unproven_audits(
    assigned: Iterable[tuple[int, str]], verdicts: Iterable[StandingVerdict]
) -> frozenset[tuple[int, str]]:
    """The (round, hotkey) audit assignments that are not proven.

    Not proven: no judging verdict yet, or a standing fault or a split that may still
    change (disputed, or within a window). A proven fault is :func:`earlier_faults`' instead.
    """
    listed = list(verdicts)
    judged = {(v.round, v.hotkey) for v in listed if v.judged}
    open_faults = {
        (v.round, v.hotkey) for v in listed if (v.fault or v.standing == "split") and not v.final
    }
    return frozenset(a for a in assigned if a not in judged or a in open_faults)


def earlier_unproven(
    index: int,
    assigned: Iterable[tuple[int, str]],
    verdicts: Iterable[StandingVerdict],
) -> frozenset[str]:
    """Hotkeys with an assigned audit in a round before ``index`` that is not proven.

    ``assigned`` lists the run's (round, hotkey) audit assignments and ``verdicts`` its
    standing verdicts (:func:`unproven_audits`: until it is decided the island's later
    rewards stay held).
    """
    early = [(r, h) for r, h in assigned if r < index]
    listed = [v for v in verdicts if v.round < index]
    return frozenset(h for _, h in unproven_audits(early, listed))


@dataclass(frozen=True, slots=True)
class Probation:
    """An island still in probation at some round, as the roster and its commits stand."""

    until: int  # the roster's probation_until_round u (moved by each probation commit)
    last_committed: bool  # it committed to round u - 1: all its probation rounds are in
    open_rounds: int  # how many of its committed rounds before u are not final yet


def probation_holds(
    islands: Mapping[str, Probation],
    assigned: Iterable[tuple[int, str]],
    verdicts: Iterable[StandingVerdict],
) -> dict[str, int]:
    """hotkey -> the hold of its probation rewards: ``u`` once probation is served, else
    :data:`PROBATION_HOLD`.

    Probation is served on an event, not a date: the island committed to its last
    probation round ``u - 1`` (so to all of them: ``u`` moves with every probation commit),
    every one of those rounds is final and every audit of it before ``u`` is proven
    (:func:`unproven_audits`). Until then nothing earned in probation has a release round,
    so a calendar cannot vest it while the island sits out, and a fault in a later
    probation round still burns all of it.
    """
    unproven = {(r, h) for r, h in unproven_audits(assigned, verdicts) if h in islands}
    out: dict[str, int] = {}
    for hotkey, p in sorted(islands.items()):
        waits = any(h == hotkey and r < p.until for r, h in unproven)
        served = p.last_committed and p.open_rounds == 0 and not waits
        out[hotkey] = p.until if served else PROBATION_HOLD
    return out


def earlier_faults(index: int, verdicts: Iterable[StandingVerdict]) -> dict[str, str]:
    """hotkey -> its first proven fault in a round before ``index`` (by round, verdict id)."""
    out: dict[str, str] = {}
    for v in sorted(verdicts, key=lambda v: (v.round, v.verdict_id)):
        if v.round < index and v.proven:
            out.setdefault(v.hotkey, f"earlier fault proven in round {v.round}: {v.reason()}")
    return out


def decide(
    commits: Iterable[CommitRow],
    tape: MergeTape | None,
    verdicts: Iterable[StandingVerdict],
    assigned: Iterable[str] = (),
    probation: Mapping[str, int] | None = None,
    earlier: Iterable[str] = (),
    proven: Mapping[str, str] | None = None,
    witnesses: TapeWitnesses | None = None,
) -> Outcome:
    """Paid / held / faulted / forfeited / unpaid for every commit of one round.

    ``probation`` maps each island still in probation at this round to the hold of its
    reward (:func:`probation_holds`: its release round, or :data:`PROBATION_HOLD`);
    ``assigned`` names the islands selected for audit; ``earlier`` the
    islands with an earlier round's audit not proven yet (:func:`earlier_unproven`);
    ``proven`` the islands with a proven earlier fault (:func:`earlier_faults`);
    ``witnesses`` the attestations on the round's tape (``tape_rule.tape_status``; None: no
    witness required).
    """
    listed = list(verdicts)
    faults = verdict_faults(listed)
    included = set(tape.included) if tape is not None else set()
    excluded = dict(tape.excluded) if tape is not None else {}
    accepted: dict[str, int] = {}
    unpaid: dict[str, str] = {}
    for c in sorted(commits, key=lambda c: c.hotkey):
        if c.hotkey in faults:
            continue
        reason = excluded.get(c.hotkey)
        if c.hotkey in included or reason in AUDIT_EXCLUSIONS:
            accepted[c.hotkey] = c.tokens
        else:
            unpaid[c.hotkey] = reason or "not included in the merge"
    held = {h: until for h, until in (probation or {}).items() if h in accepted}
    forfeited = {h: why for h, why in sorted((proven or {}).items()) if h in accepted}
    holding = frozenset(v.hotkey for v in listed if v.holds)
    pending = unjudged(assigned, listed) | frozenset(earlier) | forfeited.keys() | holding
    held.update(dict.fromkeys(pending & accepted.keys(), PENDING_AUDIT))
    judged = _tape_verdict(tape, witnesses)
    return Outcome(accepted, dict(sorted(held.items())), faults, unpaid, forfeited, judged)


def _tape_verdict(tape: MergeTape | None, witnesses: TapeWitnesses | None) -> TapeVerdict:
    """The witnesses' word on the tape the round is paid on (none: nothing to witness)."""
    if tape is None or witnesses is None or witnesses.required <= 0:
        return TapeVerdict()
    if witnesses.tape_sha256 != tape.tape_sha256:  # paid on a tape they did not judge
        return TapeVerdict("awaiting")
    return tape_status(witnesses)
