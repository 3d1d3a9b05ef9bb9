"""How a game ends: the referee's ruling, deadlines, and re-decision by recomputation.

:func:`expire` applies the deadlines of :mod:`hypertrain.dispute.game`: a party whose
message is due after its phase's deadline or its own clock loses (the island first,
as the challenger, when both are silent); the referee stage is extended at most
``referee_extensions`` times and then upheld, so a run without referees still
decides. A ``recompute`` game (leaf 0 or the update: a mismatch no bisection can
narrow; or an ``unverifiable`` verdict) is decided by :func:`recomputed` from the
re-audits of the public records: a strict majority of its jury (the run's auditors
other than the verdict's) agreeing, or one referee's re-audit. Who answers first decides
nothing. At its deadline without a quorum, the jurors that never signed a verdict of the
run are dropped (they are not live) and a strict majority of the rest decides; failing
that, the game is ``held`` when jurors re-audited ``match`` and none agreed with the
verdict (the island's reward is held, never burned on no evidence), and upheld
otherwise. :func:`bars` is the one barring rule (a referee's re-audit, or a strict
majority of the jury, never fewer than two, agreeing against the auditor), which
:func:`bars_auditor` applies to a decided ``recompute`` game (for an ``unverifiable``
verdict only the re-audits received by the upload deadline count: they prove the bytes
were served in time).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Literal

from hypertrain.dispute import opinputs
from hypertrain.dispute.errors import (
    DecidedError,
    LateAnswerError,
    UnknownRefereeError,
    WrongQueryError,
)
from hypertrain.dispute.game import decide
from hypertrain.dispute.messages import DisputeRuling
from hypertrain.dispute.model import PARTIES, Game, Outcome, Rules
from hypertrain.dispute.narrowing import NarrowStep

Check = Literal["start", "update", "unverifiable"]


def open_recompute(
    *,
    dispute_id: str,
    run_id: str,
    round: int,
    segment: int,
    island: str,
    auditor: str,
    check: Check,
    rules: Rules,
    now: int,
    jury: tuple[str, ...] = (),
) -> Game:
    """A dispute no bisection can narrow: no game, independent re-audits decide.

    That is the leaf-0 or update check of a mismatch, or an ``unverifiable`` verdict (the
    island says its bytes were served). ``jury`` is the run's listed auditors (the
    verdict's auditor and the island are dropped here). The re-audits may come up to
    ``deadline_round``; the first tick after it upholds the verdict,
    ``Rules.bound_rounds()`` after opening.
    """
    deadline = now + rules.bound_rounds() - 1
    return Game(
        dispute_id=dispute_id,
        run_id=run_id,
        round=round,
        segment=segment,
        island=island,
        auditor=auditor,
        interval=1,
        sections=(),
        start_hash="",
        island_end="",
        rules=rules,
        stage="recompute",
        check=check,
        jury=tuple(sorted(set(jury) - {auditor, island})),
        deadline_round=deadline,
        phase_opened=now,
        hi=1,
        points=(),
        steps=(
            NarrowStep(level="open", beacon_round=now, actor="island", deadline_round=deadline),
            NarrowStep(
                level="recompute", beacon_round=now, actor="auditors", deadline_round=deadline
            ),
        ),
    )


def quorum(game: Game) -> int:
    """Agreeing re-audits that decide a ``recompute`` game: a strict majority of its jury."""
    return len(game.jury) // 2 + 1 if game.jury else 0


def recomputed(
    game: Game, auditor: str, result: str, now: int, referees: frozenset[str] = frozenset()
) -> Game:
    """Count one re-audit of a ``recompute`` game's assignment; decide on a quorum.

    A referee's re-audit decides alone. A juror's first re-audit is counted; the game is
    overturned once :func:`quorum` jurors found ``match``, upheld once as many found
    anything else, and otherwise waits (the deadline upholds it). A key outside the jury
    counts nothing, so no order of arrival decides.
    """
    if game.stage != "recompute" or auditor in (game.auditor, game.island):
        return game
    if auditor in referees:
        what = "it matches" if result == "match" else result
        reason = f"referee {auditor[:12]} re-audited the {game.check} check: {what}"
        outcome: Outcome = "overturned" if result == "match" else "upheld"
        return decide(game, outcome, reason, now, "referee")
    if auditor not in game.jury or auditor in game.reaudits:
        return game
    game = game.model_copy(update={"reaudits": {**game.reaudits, auditor: result}})
    matches = sum(r == "match" for r in game.reaudits.values())
    need, against = quorum(game), len(game.reaudits) - matches
    of = f"of {len(game.jury)} other auditors re-audited the {game.check} check"
    if matches >= need:
        return decide(game, "overturned", f"{matches} {of}: it matches", now, "auditors")
    if against >= need:
        return decide(game, "upheld", f"{against} {of}: it fails", now, "auditors")
    return game


def bars(jury: Iterable[str], results: Mapping[str, str], by_referee: bool = False) -> bool:
    """The one barring rule: a referee's re-audit, or ``match`` re-audits from a strict
    majority of ``jury`` and never fewer than two (no single contrary claim bars).

    ``results`` maps each juror to its re-audit's result; keys outside ``jury`` count
    nothing.
    """
    jurors = frozenset(jury)
    matches = sum(1 for k, r in results.items() if k in jurors and r == "match")
    return by_referee or matches >= max(2, len(jurors) // 2 + 1)


def bars_auditor(game: Game, timely: frozenset[str] | None = None) -> bool:
    """Whether a decided ``recompute`` game proves the verdict's auditor wrong (:func:`bars`).

    The jury is the one the decision counted (the live jurors at a deadline). An
    ``unverifiable`` verdict says bytes were missing at the upload deadline, so only the
    re-audits of ``timely`` jurors (received by that deadline: they fetched the bytes in
    time) count against it, and a referee's later re-audit proves nothing about that
    moment; without ``timely`` it never bars.
    """
    if game.outcome != "overturned":
        return False
    jury = game.counted or game.jury
    if game.check == "unverifiable":
        if timely is None:
            return False
        return bars(jury, {k: r for k, r in game.reaudits.items() if k in timely})
    by_referee = bool(game.steps) and game.steps[-1].actor == "referee"
    return bars(jury, game.reaudits, by_referee)


def supply_inputs(game: Game, data: bytes, now: int) -> tuple[Game, str]:
    """Accept the contested operation's input tensors; returns the game and their SHA-256."""
    if game.stage == "decided":
        raise DecidedError(f"dispute {game.dispute_id[:16]} is decided ({game.outcome})")
    if game.stage != "referee" or game.op is None:
        raise WrongQueryError("no operation is contested yet")
    if now > game.deadline_round:
        raise LateAnswerError(f"the deadline was beacon round {game.deadline_round}")
    opinputs.check_inputs(data, game.op.inputs)
    sha = hashlib.sha256(data).hexdigest()
    return game.model_copy(update={"inputs_sha256": sha, "messages": game.messages + 1}), sha


def rule(game: Game, signer: str, body: DisputeRuling, referees: frozenset[str], now: int) -> Game:
    """Decide the game from a referee's recomputed output digests."""
    if game.stage == "decided":
        raise DecidedError(f"dispute {game.dispute_id[:16]} is decided ({game.outcome})")
    if signer not in referees or signer in (game.auditor, game.island):
        raise UnknownRefereeError(f"{signer} is not a referee of this run")
    if game.stage != "referee" or body.query != game.query or body.dispute_id != game.dispute_id:
        raise WrongQueryError("this ruling is not for the contested operation")
    if game.inputs_sha256 is None or body.inputs_sha256 != game.inputs_sha256:
        raise WrongQueryError("the ruling names other inputs than the agreed ones")
    if now > game.deadline_round:
        raise LateAnswerError(f"the deadline was beacon round {game.deadline_round}")
    island_right = body.outputs == game.outputs["island"]
    who = (
        "island"
        if island_right
        else ("auditor" if body.outputs == game.outputs["auditor"] else "neither party")
    )
    game = game.model_copy(update={"messages": game.messages + 1})
    op = game.op.op if game.op else "?"
    reason = f"referee {signer[:12]} recomputed {op}: {who} is right"
    return decide(game, "overturned" if island_right else "upheld", reason, now, "referee")


def expire(game: Game, now: int, live: frozenset[str] | None = None) -> Game:
    """Apply the deadlines: a party that owes a message past its deadline loses.

    ``live`` names the keys that signed a verdict of the run by now; a ``recompute`` game
    at its deadline counts only its live jurors (None: the whole jury).
    """
    if game.stage == "decided":
        return game
    if game.stage == "recompute":
        if now <= game.deadline_round:
            return game
        return _recompute_deadline(game, now, live)
    if game.stage == "referee":
        return _expire_referee(game, now)
    for party in PARTIES:  # the island first: both silent is the challenger's loss
        if game.due(party) and now > game.party_deadline(party):
            outcome: Outcome = "upheld" if party == "island" else "overturned"
            what = "reveal" if game.revealing else "commit to"
            reason = f"the {party} did not {what} its answer to query {game.query} in time"
            return decide(game, outcome, reason, now, "deadline")
    return game


def _expire_referee(game: Game, now: int) -> Game:
    if now <= game.deadline_round:
        return game
    if game.inputs_sha256 is None:
        reason = "nobody supplied the contested operation's inputs"
        return decide(game, "upheld", reason, now, "deadline")
    if game.extensions >= game.rules.referee_extensions:
        reason = f"no referee ruled after {game.extensions} extensions: the verdict stands"
        return decide(game, "upheld", reason, now, "deadline")
    deadline = now + game.rules.referee_rounds
    waiting = NarrowStep(
        level="referee", beacon_round=now, actor="deadline", step=game.step,
        section=game.sections[game.section or 0], operation=game.op.op if game.op else None,
        op_index=game.op_index, deadline_round=deadline,
    )  # fmt: skip
    return game.model_copy(
        update={
            "deadline_round": deadline,
            "extensions": game.extensions + 1,
            "steps": (*game.steps, waiting),
        }
    )


def _recompute_deadline(game: Game, now: int, live: frozenset[str] | None) -> Game:
    """A ``recompute`` game's deadline: a majority of the live jurors, else held or upheld."""
    counted = game.jury if live is None else tuple(k for k in game.jury if k in live)
    game = game.model_copy(update={"counted": counted})
    votes = {k: r for k, r in game.reaudits.items() if k in counted}
    matches = sum(r == "match" for r in votes.values())
    need, against = len(counted) // 2 + 1, len(votes) - matches
    of = f"of the {len(counted)} live jurors re-audited the {game.check} check"
    if counted and matches >= need:
        return decide(game, "overturned", f"{matches} {of}: it matches", now, "auditors")
    if counted and against >= need:
        return decide(game, "upheld", f"{against} {of}: it fails", now, "auditors")
    if game.reaudits and all(r == "match" for r in game.reaudits.values()):
        reason = "no quorum by the deadline, and no juror agreed with the verdict: held"
        return decide(game, "held", reason, now, "deadline")
    reason = "no quorum of independent re-audits by the deadline: the verdict stands"
    return decide(game, "upheld", reason, now, "deadline")
