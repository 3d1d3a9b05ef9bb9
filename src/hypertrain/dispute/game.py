"""The dispute game as a pure state machine: every transition returns a new :class:`Game`.

Two parties, the judged ``island`` and the ``auditor`` that signed the mismatch
verdict, agree on the state hash at the start of a segment of ``J`` steps (a leaf the
island committed) and disagree on the end. The game narrows that disagreement:

1. **step**: each query asks both parties for the state hashes after the steps in
   ``points`` (``fanout`` evenly spaced points strictly inside ``(lo, hi)``; the first
   query also asks for step ``J``, which for the island must be its committed leaf).
   The first point where they differ becomes ``hi``, the last one before it where they
   agree becomes ``lo``; when ``hi == lo + 1`` the disputed step is ``lo``. With
   ``fanout = 1`` this takes ``ceil(log2 J)`` queries (9 for J = 500, 18 answers).
2. **layer**: both commit the digests of every section of that step (each layer's
   forward, the loss, the backward, the optimizer update); the first differing section
   is kept.
3. **op**: both commit every operation of that section (name, arguments, input and
   output digests); the first operation whose outputs differ while its name,
   arguments and inputs agree is contested.
4. **referee**: either party uploads the operation's input tensors (checked against
   the agreed input digests); a referee named in the manifest, never the verdict's
   auditor, recomputes the operation and signs its output digests. The verdict is
   *overturned* when the island's outputs are the referee's, else *upheld*.

A party that has not answered when the deadline (in beacon rounds) passes loses; a
game whose traces disagree before any operation's inputs agree cannot be narrowed and
the verdict stands. Refusals raise :class:`~hypertrain.dispute.errors.DisputeError`
subclasses and leave the game as it was.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hypertrain.dispute import opinputs
from hypertrain.dispute.errors import (
    DecidedError,
    DuplicateAnswerError,
    LateAnswerError,
    NotAPartyError,
    UnknownRefereeError,
    WrongAnswerError,
    WrongCountError,
    WrongQueryError,
)
from hypertrain.dispute.messages import DisputeAnswer, DisputeRuling, OpEntry

Party = Literal["island", "auditor"]
Stage = Literal["step", "layer", "op", "referee", "decided"]
Outcome = Literal["upheld", "overturned"]
PARTIES: tuple[Party, Party] = ("island", "auditor")


class Rules(BaseModel):
    """The manifest's dispute rules that the game itself needs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fanout: int = Field(default=1, ge=1, le=255)
    answer_rounds: int = Field(default=10, ge=1)
    referee_rounds: int = Field(default=10, ge=1)


class Game(BaseModel):
    """One dispute's whole state; stored as JSON by the service."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dispute_id: str
    run_id: str
    round: int
    segment: int
    island: str
    auditor: str
    interval: int = Field(ge=1)  # J
    sections: tuple[str, ...]
    start_hash: str
    island_end: str
    rules: Rules
    stage: Stage = "step"
    query: int = 0
    deadline_round: int
    lo: int = 0
    hi: int
    points: tuple[int, ...]
    answers: dict[str, DisputeAnswer] = Field(default_factory=dict)
    step: int | None = None
    section: int | None = None
    op_index: int | None = None
    op: OpEntry | None = None
    outputs: dict[str, list[str]] = Field(default_factory=dict)
    inputs_sha256: str | None = None
    outcome: Outcome | None = None
    reason: str = ""
    log: tuple[str, ...] = ()
    messages: int = 1  # accepted messages, the opening one included

    def role_of(self, signer: str) -> Party:
        if signer == self.island:
            return "island"
        if signer == self.auditor:
            return "auditor"
        raise NotAPartyError(f"{signer} is not a party to dispute {self.dispute_id[:16]}")


def section_names(num_layers: int, micro_batches: int) -> tuple[str, ...]:
    """The sections of one step's trace, in execution order (see module docstring)."""
    per_mb = [f"layers.{i}" for i in range(num_layers)] + ["logits", "loss", "backward"]
    return (*(f"mb{m}.{s}" for m in range(micro_batches) for s in per_mb), "update")


def midpoints(lo: int, hi: int, fanout: int) -> tuple[int, ...]:
    """Up to ``fanout`` evenly spaced steps strictly between ``lo`` and ``hi``."""
    span = hi - lo
    return tuple(sorted({lo + span * i // (fanout + 1) for i in range(1, fanout + 1)} - {lo, hi}))


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
        deadline_round=now + rules.answer_rounds,
        hi=interval,
        points=(*midpoints(0, interval, rules.fanout), interval),
        log=(f"opened at beacon {now}: segment {segment}, steps (0, {interval}]",),
    )


def answer(game: Game, signer: str, body: DisputeAnswer, now: int) -> Game:
    """Accept one party's answer to the current query; resolve when both have answered."""
    party = _check_open(game, signer, now)
    if game.stage not in ("step", "layer", "op") or body.level != game.stage:
        raise WrongQueryError(f"the game is at the {game.stage} level, not {body.level}")
    if body.dispute_id != game.dispute_id or body.query != game.query:
        raise WrongQueryError(f"this answers query {body.query}, the open one is {game.query}")
    if body.segment != game.segment:
        raise WrongQueryError(f"hashes for segment {body.segment}; disputed is {game.segment}")
    if party in game.answers:
        raise DuplicateAnswerError(f"the {party} already answered query {game.query}")
    {"step": _check_step, "layer": _check_layer, "op": _check_op}[game.stage](game, party, body)
    answers = {**game.answers, party: body}
    game = game.model_copy(update={"answers": answers, "messages": game.messages + 1})
    if len(answers) < len(PARTIES):
        return game
    return {"step": _resolve_step, "layer": _resolve_layer, "op": _resolve_op}[game.stage](
        game, now
    )


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
    return _decide(
        game,
        "overturned" if island_right else "upheld",
        f"referee {signer[:12]} recomputed {game.op.op if game.op else '?'}: {who} is right",
    )


def expire(game: Game, now: int) -> Game:
    """Apply the deadline: a party that has not answered loses (unchanged if not due)."""
    if game.stage == "decided" or now <= game.deadline_round:
        return game
    if game.stage == "referee":
        if game.inputs_sha256 is None:
            return _decide(game, "upheld", "nobody supplied the contested operation's inputs")
        log = (*game.log, f"beacon {now}: no ruling yet, referee deadline extended")
        return game.model_copy(
            update={"deadline_round": now + game.rules.referee_rounds, "log": log}
        )
    if "island" not in game.answers:
        return _decide(game, "upheld", f"the island did not answer query {game.query} in time")
    return _decide(game, "overturned", f"the auditor did not answer query {game.query} in time")


def _check_open(game: Game, signer: str, now: int) -> Party:
    party = game.role_of(signer)
    if game.stage == "decided":
        raise DecidedError(f"dispute {game.dispute_id[:16]} is decided ({game.outcome})")
    if now > game.deadline_round:
        raise LateAnswerError(
            f"query {game.query} closed at beacon round {game.deadline_round} (now {now})"
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


def _next_query(game: Game, now: int, **update: object) -> Game:
    return game.model_copy(
        update={
            "answers": {},
            "query": game.query + 1,
            "deadline_round": now + game.rules.answer_rounds,
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
            return _decide(game, "overturned", "the auditor's own hashes reach the island's leaf")
    log = (*game.log, f"beacon {now}: agree after step {lo}, differ after step {hi}")
    if hi - lo == 1:
        return _next_query(game, now, lo=lo, hi=hi, points=(), stage="layer", step=lo, log=log)
    points = midpoints(lo, hi, game.rules.fanout)
    return _next_query(game, now, lo=lo, hi=hi, points=points, log=log)


def _resolve_layer(game: Game, now: int) -> Game:
    mine, theirs = game.answers["island"].sections, game.answers["auditor"].sections
    first = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b), None)
    if first is None:
        return _decide(
            game, "upheld", f"both traces of step {game.step} agree: no operation differs"
        )
    log = (*game.log, f"beacon {now}: step {game.step} first differs in {game.sections[first]}")
    return _next_query(game, now, stage="op", section=first, log=log)


def _resolve_op(game: Game, now: int) -> Game:
    mine, theirs = game.answers["island"].ops, game.answers["auditor"].ops
    first = next(
        (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
        min(len(mine), len(theirs)),
    )
    if first >= min(len(mine), len(theirs)) or not mine[first].agreed_with(theirs[first]):
        return _decide(game, "upheld", "the traces part before any operation's inputs agree")
    entry = mine[first]
    name = game.sections[game.section or 0]
    log = (*game.log, f"beacon {now}: {name} operation {first} ({entry.op}) contested")
    outputs = {"island": list(entry.outputs), "auditor": list(theirs[first].outputs)}
    return _next_query(
        game,
        now,
        stage="referee",
        op_index=first,
        op=entry.model_copy(update={"outputs": []}),
        outputs=outputs,
        log=log,
        deadline_round=now + game.rules.referee_rounds,
    )


def _decide(game: Game, outcome: Outcome, reason: str) -> Game:
    return game.model_copy(
        update={
            "stage": "decided",
            "outcome": outcome,
            "reason": reason,
            "answers": {},
            "log": (*game.log, f"{outcome}: {reason}"),
        }
    )
