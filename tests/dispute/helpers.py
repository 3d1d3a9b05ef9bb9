"""Two scripted parties whose state hashes part at a chosen step."""

from __future__ import annotations

import hashlib

from hypertrain.dispute import game as g
from hypertrain.dispute.messages import DisputeAnswer, OpEntry, SectionDigest, commitment_of

ISLAND = "5" + "I" * 47
AUDITOR = "5" + "A" * 47
REFEREE = "5" + "R" * 47
DISPUTE_ID = "d" * 64
SALT = "5a" * 32


def h(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def state_hash(party: str, step: int, part_at: int) -> str:
    """Both parties agree on states before ``part_at``, then each has its own."""
    return h("state", step) if step < part_at else h("state", step, party)


def new_game(
    interval: int, part_at: int, fanout: int = 1, now: int = 0, rules: g.Rules | None = None
) -> g.Game:
    return g.open_game(
        dispute_id=DISPUTE_ID,
        run_id="run",
        round=3,
        segment=1,
        island=ISLAND,
        auditor=AUDITOR,
        interval=interval,
        sections=g.section_names(2, 1),
        start_hash=state_hash(ISLAND, 0, part_at),
        island_end=state_hash(ISLAND, interval, part_at),
        rules=rules or g.Rules(fanout=fanout, answer_rounds=5, referee_rounds=5),
        now=now,
    )


def step_answer(game: g.Game, party: str, part_at: int) -> DisputeAnswer:
    return DisputeAnswer(
        dispute_id=game.dispute_id,
        query=game.query,
        level="step",
        segment=game.segment,
        hashes=[state_hash(party, p, part_at) for p in game.points],
    )


def sections(game: g.Game, party: str, bad_section: int) -> list[SectionDigest]:
    return [
        SectionDigest(name=n, digest=h(n) if i < bad_section else h(n, party))
        for i, n in enumerate(game.sections)
    ]


def ops(party: str, bad_op: int, count: int = 6) -> list[OpEntry]:
    out = []
    for i in range(count):
        agreed = i <= bad_op
        out.append(
            OpEntry(
                op="aten.mm.default",
                args='[{"t":0},{"t":1}]',
                inputs=[h("in", i), h("in2", i)] if agreed else [h("in", i, party), h("x")],
                outputs=[h("out", i)] if i < bad_op else [h("out", i, party)],
            )
        )
    return out


def layer_answer(game: g.Game, party: str, bad_section: int) -> DisputeAnswer:
    return DisputeAnswer(
        dispute_id=game.dispute_id,
        query=game.query,
        level="layer",
        segment=game.segment,
        step=game.step,
        sections=sections(game, party, bad_section),
    )


def op_answer(game: g.Game, party: str, bad_op: int) -> DisputeAnswer:
    return DisputeAnswer(
        dispute_id=game.dispute_id,
        query=game.query,
        level="op",
        segment=game.segment,
        step=game.step,
        section=game.section,
        ops=ops(party, bad_op),
    )


def salted(body: DisputeAnswer, salt: str = SALT) -> DisputeAnswer:
    return body.model_copy(update={"salt": salt})


def commit(game: g.Game, signer: str, body: DisputeAnswer, now: int) -> g.Game:
    """``signer`` commits to ``body`` (salted with :data:`SALT`)."""
    return g.answer(game, signer, commitment_of(salted(body)), now)


def reveal(game: g.Game, signer: str, body: DisputeAnswer, now: int) -> g.Game:
    return g.answer(game, signer, salted(body), now)


def committed(game: g.Game, island: DisputeAnswer, auditor: DisputeAnswer, now: int) -> g.Game:
    """Both parties committed to these answers; reveals are due."""
    return commit(commit(game, ISLAND, island, now), AUDITOR, auditor, now)


def play(game: g.Game, island: DisputeAnswer, auditor: DisputeAnswer, now: int) -> g.Game:
    """One query: both commit, then both reveal (the island first)."""
    game = committed(game, island, auditor, now)
    return reveal(reveal(game, ISLAND, island, now), AUDITOR, auditor, now)


def narrow_steps(game: g.Game, part_at: int, now: int = 1) -> g.Game:
    while game.stage == "step":
        island, auditor = step_answer(game, ISLAND, part_at), step_answer(game, AUDITOR, part_at)
        game = play(game, island, auditor, now)
    return game
