"""The dispute game as a pure state machine: every transition returns a new
:class:`~hypertrain.dispute.model.Game` (the game's state and rules live in
:mod:`hypertrain.dispute.model`; this module names them too, for its callers).

Two parties, the judged ``island`` and the ``auditor`` that signed the mismatch
verdict, agree on the state hash at the start of a segment of ``J`` steps (a leaf the
island committed) and disagree on the end. The segment is the one the verdict names
as the first that differs (the service refuses any other), so a game can only be
played on the disagreement itself. The game narrows it:

1. **step**: each query asks both parties for the state hashes after the steps in
   ``points`` (``fanout`` evenly spaced points strictly inside ``(lo, hi)``; the first
   query also asks for step ``J``, which for the island must be its committed leaf).
   The first point where they differ becomes ``hi``, the last one before it where they
   agree becomes ``lo``; when ``hi == lo + 1`` the disputed step is ``lo``. With
   ``fanout = 1`` this takes ``ceil(log2 J)`` queries (9 for J = 500).
2. **layer**: both commit the digests of every section of that step (each layer's
   forward, the loss, the backward, the optimizer update); the first differing section
   is kept.
3. **op**: both commit every operation of that section (name, arguments, input and
   output digests); the first operation whose outputs differ while its name,
   arguments and inputs agree is contested.
4. **referee**: either party uploads the operation's input tensors (checked against
   the agreed input digests); a referee named in the manifest, never the verdict's
   auditor, recomputes the operation and signs its output digests. The verdict is
   *overturned* when the island's outputs are the referee's, else *upheld*. Without a
   ruling the deadline is extended at most ``referee_extensions`` times, then the
   verdict is upheld: a run without referees still decides every game.

Every query is answered in two messages: a commitment to the salted answer, then,
once both parties committed, the reveal (:mod:`hypertrain.dispute.messages`), so
neither can copy the other. Each party has a chess clock of ``clock_rounds`` beacon
rounds for the whole game, charged only while an answer of its own is due, and each
answer is also due ``answer_rounds`` after its phase opened: a party that misses
either loses. Settlement therefore waits at most ``2 * clock_rounds +
referee_rounds * (1 + referee_extensions)`` beacon rounds for a game, whatever ``J``.

Mismatches that need no game (leaf 0 against the derived start state, the update
against the final state) open a ``recompute`` game instead, decided by an
independent re-audit (:func:`recomputed`); a game whose traces agree where the parties'
state hashes differ becomes one (:func:`escalate`): the trace cannot say who lied.
Each transition appends a typed :class:`~hypertrain.dispute.narrowing.NarrowStep`. Refusals raise
:class:`~hypertrain.dispute.errors.DisputeError` subclasses and leave the game as it was.
"""

from __future__ import annotations

from hypertrain.dispute.errors import (
    DecidedError,
    DuplicateAnswerError,
    LateAnswerError,
    WrongAnswerError,
    WrongCountError,
    WrongQueryError,
)
from hypertrain.dispute.messages import DisputeAnswer, answer_digest
from hypertrain.dispute.model import (
    PARTIES,
    Game,
    Outcome,
    Party,
    Rules,
    midpoints,
    section_names,
)
from hypertrain.dispute.narrowing import Actor, NarrowStep

# the game's state (:mod:`hypertrain.dispute.model`) is read through this module too
__all__ = [
    "PARTIES",
    "Game",
    "Outcome",
    "Party",
    "Rules",
    "answer",
    "decide",
    "escalate",
    "midpoints",
    "open_game",
    "section_names",
]


def open_game(
    *,
    dispute_id: str,
    run_id: str,
    round: int,
    segment: int,
    island: str,
    auditor: str,
    interval: int,
    sections: tuple[str, ...],
    start_hash: str,
    island_end: str,
    rules: Rules,
    now: int,
) -> Game:
    """A new game at the step level; its first query includes step ``J``."""
    deadline = now + rules.answer_rounds
    return Game(
        dispute_id=dispute_id,
        run_id=run_id,
        round=round,
        segment=segment,
        island=island,
        auditor=auditor,
        interval=interval,
        sections=sections,
        start_hash=start_hash,
        island_end=island_end,
        rules=rules,
        deadline_round=deadline,
        phase_opened=now,
        hi=interval,
        points=(*midpoints(0, interval, rules.fanout), interval),
        steps=(
            NarrowStep(
                level="open", beacon_round=now, actor="island", lo=0, hi=interval,
                deadline_round=deadline,
            ),
        ),
    )  # fmt: skip


def answer(game: Game, signer: str, body: DisputeAnswer, now: int) -> Game:
    """Accept one party's commitment or reveal for the open query; resolve on both reveals."""
    party = _check_open(game, signer, now)
    if game.stage not in ("step", "layer", "op") or body.level != game.stage:
        raise WrongQueryError(f"the game is at the {game.stage} level, not {body.level}")
    if body.dispute_id != game.dispute_id or body.query != game.query:
        raise WrongQueryError(f"this answers query {body.query}, the open one is {game.query}")
    if body.segment != game.segment:
        raise WrongQueryError(f"hashes for segment {body.segment}; disputed is {game.segment}")
    if body.is_commitment:
        return _commit(game, party, body, now)
    if not game.revealing:
        raise WrongQueryError(f"query {game.query}: both parties commit before either reveals")
    if party in game.answers:
        raise DuplicateAnswerError(f"the {party} already answered query {game.query}")
    if answer_digest(body) != game.commitments[party]:
        raise WrongAnswerError(f"the {party}'s reveal is not what it committed to")
    {"step": _check_step, "layer": _check_layer, "op": _check_op}[game.stage](game, party, body)
    answers = {**game.answers, party: body}
    game = _charge(game, party, now).model_copy(
        update={"answers": answers, "messages": game.messages + 1}
    )
    if len(answers) < len(PARTIES):
        return game
    return {"step": _resolve_step, "layer": _resolve_layer, "op": _resolve_op}[game.stage](
        game, now
    )


def _commit(game: Game, party: Party, body: DisputeAnswer, now: int) -> Game:
    if party in game.commitments:
        raise DuplicateAnswerError(f"the {party} already committed to query {game.query}")
    if body.hashes or body.sections or body.ops or body.salt:
        raise WrongQueryError("a commitment carries no answer; reveal it once both committed")
    assert body.commitment is not None
    commitments = {**game.commitments, party: body.commitment}
    game = _charge(game, party, now).model_copy(
        update={"commitments": commitments, "messages": game.messages + 1}
    )
    if game.revealing:  # the reveal phase opens now for both
        game = game.model_copy(
            update={"phase_opened": now, "deadline_round": now + game.rules.answer_rounds}
        )
    return game


def _charge(game: Game, party: Party, now: int) -> Game:
    used = game.clock_used.get(party, 0) + max(0, now - game.phase_opened)
    return game.model_copy(update={"clock_used": {**game.clock_used, party: used}})


def _check_open(game: Game, signer: str, now: int) -> Party:
    party = game.role_of(signer)
    if game.stage == "decided":
        raise DecidedError(f"dispute {game.dispute_id[:16]} is decided ({game.outcome})")
    if game.stage in ("step", "layer", "op") and now > game.party_deadline(party):
        raise LateAnswerError(
            f"query {game.query}: the {party}'s answer was due by beacon round"
            f" {game.party_deadline(party)} (now {now})"
        )
    return party


def _check_step(game: Game, party: Party, body: DisputeAnswer) -> None:
    if len(body.hashes) != len(game.points):
        raise WrongCountError(f"{len(body.hashes)} hashes for {len(game.points)} asked steps")
    at_end = party == "island" and game.points[-1] == game.interval
    if at_end and body.hashes[-1] != game.island_end:
        raise WrongAnswerError("the hash after step J must be the island's committed leaf")


def _check_layer(game: Game, party: Party, body: DisputeAnswer) -> None:
    if body.step != game.step:
        raise WrongQueryError(f"sections of step {body.step}; disputed is step {game.step}")
    if len(body.sections) != len(game.sections):
        raise WrongCountError(f"{len(body.sections)} sections, a step has {len(game.sections)}")
    if tuple(s.name for s in body.sections) != game.sections:
        raise WrongQueryError("section names are not the step's sections in order")


def _check_op(game: Game, party: Party, body: DisputeAnswer) -> None:
    if body.step != game.step or body.section != game.section:
        raise WrongQueryError(
            f"operations of step {body.step} section {body.section}; disputed is step"
            f" {game.step} section {game.section}"
        )
    if not body.ops:
        raise WrongCountError("an operation trace needs at least one operation")


def _next_query(game: Game, now: int, narrowed: NarrowStep, **update: object) -> Game:
    deadline = now + game.rules.answer_rounds
    return game.model_copy(
        update={
            "answers": {},
            "commitments": {},
            "query": game.query + 1,
            "phase_opened": now,
            "deadline_round": deadline,
            "steps": (*game.steps, narrowed.model_copy(update={"deadline_round": deadline})),
            **update,
        }
    )


def _resolve_step(game: Game, now: int) -> Game:
    mine, theirs = game.answers["island"].hashes, game.answers["auditor"].hashes
    lo, hi = game.lo, game.hi
    for point, a, b in zip(game.points, mine, theirs, strict=True):
        if a != b:
            hi = point
            break
        lo = point
    else:
        if game.points and game.points[-1] == game.interval:
            return decide(
                game, "overturned", "the auditor's own hashes reach the island's leaf", now, "both"
            )
    step = NarrowStep(level="step", beacon_round=now, actor="both", lo=lo, hi=hi)
    if hi - lo == 1:
        step = step.model_copy(update={"step": lo})
        return _next_query(game, now, step, lo=lo, hi=hi, points=(), stage="layer", step=lo)
    points = midpoints(lo, hi, game.rules.fanout)
    return _next_query(game, now, step, lo=lo, hi=hi, points=points)


def _resolve_layer(game: Game, now: int) -> Game:
    mine, theirs = game.answers["island"].sections, game.answers["auditor"].sections
    first = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b), None)
    if first is None:
        reason = f"both traces of step {game.step} agree: no operation differs"
        return escalate(game, reason, now)
    step = NarrowStep(
        level="layer", beacon_round=now, actor="both", step=game.step,
        section=game.sections[first],
    )  # fmt: skip
    return _next_query(game, now, step, stage="op", section=first)


def _resolve_op(game: Game, now: int) -> Game:
    mine, theirs = game.answers["island"].ops, game.answers["auditor"].ops
    first = next(
        (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
        min(len(mine), len(theirs)),
    )
    if first >= min(len(mine), len(theirs)) or not mine[first].agreed_with(theirs[first]):
        reason = "the traces part before any operation's inputs agree"
        return escalate(game, reason, now)
    entry = mine[first]
    name = game.sections[game.section or 0]
    outputs = {"island": list(entry.outputs), "auditor": list(theirs[first].outputs)}
    contested = NarrowStep(
        level="op", beacon_round=now, actor="both", step=game.step, section=name,
        operation=entry.op, op_index=first,
    )  # fmt: skip
    game = _next_query(
        game,
        now,
        contested,
        stage="referee",
        op_index=first,
        op=entry.model_copy(update={"outputs": []}),
        outputs=outputs,
    )
    deadline = now + game.rules.referee_rounds
    waiting = NarrowStep(
        level="referee", beacon_round=now, actor="both", step=game.step, section=name,
        operation=entry.op, op_index=first, deadline_round=deadline,
    )  # fmt: skip
    return game.model_copy(update={"deadline_round": deadline, "steps": (*game.steps, waiting)})


def escalate(game: Game, reason: str, now: int) -> Game:
    """The traces cannot tell the parties apart: independent auditors re-audit instead.

    Both parties' answers agree where they should differ (every section of the disputed
    step, or everything before the first operation whose inputs agree), so one of them
    answered the state hashes and the trace inconsistently, and the trace alone does not
    say who. Neither wins by it: the disputed verdict is set aside and the game becomes a
    ``recompute`` game, decided by the run's other auditors replaying the segment
    (:func:`hypertrain.dispute.resolution.recomputed`), within the game's bound from its
    opening. A liar that agrees on every section therefore never upholds its verdict.
    """
    opened = game.steps[0].beacon_round if game.steps else now
    deadline = max(now, opened + game.rules.bound_rounds() - 1)
    step = NarrowStep(
        level="recompute", beacon_round=now, actor="auditors", step=game.step,
        deadline_round=deadline, reason=reason,
    )  # fmt: skip
    return game.model_copy(
        update={
            "stage": "recompute",
            "deadline_round": deadline,
            "phase_opened": now,
            "answers": {},
            "commitments": {},
            "steps": (*game.steps, step),
        }
    )


def decide(game: Game, outcome: Outcome, reason: str, now: int, actor: Actor) -> Game:
    """The game's end: the outcome, its reason and the decided narrowing step."""
    last = NarrowStep(
        level="decided", beacon_round=now, actor=actor, step=game.step,
        section=None if game.section is None else game.sections[game.section],
        operation=game.op.op if game.op else None, outcome=outcome, reason=reason,
    )  # fmt: skip
    return game.model_copy(
        update={
            "stage": "decided",
            "outcome": outcome,
            "reason": reason,
            "answers": {},
            "commitments": {},
            "steps": (*game.steps, last),
        }
    )
