"""How a game ends: the referee's ruling, deadlines, and re-decision by recomputation.

:func:`expire` applies the deadlines of :mod:`hypertrain.dispute.game`: a party whose
message is due after its phase's deadline or its own clock loses (the island first,
as the challenger, when both are silent); the referee stage is extended at most
``referee_extensions`` times and then upheld, so a run without referees still
decides. A ``recompute`` game (leaf 0 or the update: a mismatch no bisection can
narrow; or an ``unverifiable`` verdict) is decided by :func:`recomputed` from an
independent auditor's re-audit of the public records, or upheld when none comes by its
deadline.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from hypertrain.dispute import opinputs
from hypertrain.dispute.errors import (
    DecidedError,
    LateAnswerError,
    UnknownRefereeError,
    WrongQueryError,
)
from hypertrain.dispute.game import PARTIES, Game, Outcome, Rules, decide
from hypertrain.dispute.messages import DisputeRuling
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
) -> Game:
    """A dispute no bisection can narrow: no game, an independent re-audit decides.

    That is the leaf-0 or update check of a mismatch, or an ``unverifiable`` verdict (the
    island says its bytes were served). The re-audit may come up to ``deadline_round``;
    the first tick after it upholds the verdict, ``Rules.bound_rounds()`` after opening.
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


def recomputed(game: Game, auditor: str, result: str, now: int) -> Game:
    """Decide a ``recompute`` game from another auditor's verdict on the same assignment."""
    if game.stage != "recompute" or auditor == game.auditor:
        return game
    if result == "match":
        reason = f"auditor {auditor[:12]} re-audited the {game.check} check: it matches"
        return decide(game, "overturned", reason, now, "auditors")
    reason = f"auditor {auditor[:12]} re-audited the {game.check} check: {result}"
    return decide(game, "upheld", reason, now, "auditors")


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


def expire(game: Game, now: int) -> Game:
    """Apply the deadlines: a party that owes a message past its deadline loses."""
    if game.stage == "decided":
        return game
    if game.stage == "recompute":
        if now <= game.deadline_round:
            return game
        reason = "no independent re-audit by the deadline: the verdict stands"
        return decide(game, "upheld", reason, now, "deadline")
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
