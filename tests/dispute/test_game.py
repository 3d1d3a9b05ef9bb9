"""The dispute state machine: narrowing, outcomes, deadlines and every refusal."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypertrain.dispute import game as g
from hypertrain.dispute import opinputs
from hypertrain.dispute.errors import (
    DecidedError,
    DuplicateAnswerError,
    InputMismatchError,
    LateAnswerError,
    NotAPartyError,
    UnknownRefereeError,
    WrongAnswerError,
    WrongCountError,
    WrongQueryError,
)
from hypertrain.dispute.messages import DisputeRuling
from tests.dispute.helpers import (
    AUDITOR,
    ISLAND,
    REFEREE,
    layer_answer,
    narrow_steps,
    new_game,
    op_answer,
    step_answer,
)

REFEREES = frozenset({REFEREE})


@given(
    interval=st.integers(1, 600),
    data=st.data(),
    fanout=st.integers(1, 7),
)
def test_step_bisection_finds_the_first_differing_step(
    interval: int, data: st.DataObject, fanout: int
) -> None:
    part_at = data.draw(st.integers(1, interval))
    game = narrow_steps(new_game(interval, part_at, fanout), part_at)
    assert game.stage == "layer"
    assert game.step == part_at - 1
    assert (game.lo, game.hi) == (part_at - 1, part_at)
    # Each query at least divides the open range by fanout + 1.
    assert game.query <= math.ceil(math.log(interval, fanout + 1)) + 1 if interval > 1 else 1


def test_message_count_for_j_500() -> None:
    game = narrow_steps(new_game(500, 317), 317)
    assert game.query == 9  # ceil(log2 500) queries, two answers each
    assert game.messages == 1 + 18


def test_auditor_agreeing_at_j_overturns() -> None:
    game = narrow_steps(new_game(8, part_at=9), 9)  # the parties never part
    assert game.stage == "decided" and game.outcome == "overturned"


def _to_referee(bad_section: int = 2, bad_op: int = 3) -> g.Game:
    game = narrow_steps(new_game(8, 5), 5)
    game = g.answer(game, ISLAND, layer_answer(game, ISLAND, bad_section), 2)
    game = g.answer(game, AUDITOR, layer_answer(game, AUDITOR, bad_section), 2)
    assert game.stage == "op" and game.section == bad_section
    game = g.answer(game, AUDITOR, op_answer(game, AUDITOR, bad_op), 3)
    return g.answer(game, ISLAND, op_answer(game, ISLAND, bad_op), 3)


def _with_real_inputs(game: g.Game) -> tuple[g.Game, bytes]:
    """The helper's digests are not tensor digests: re-point the op at real tensors."""
    assert game.op is not None
    tensors = [
        opinputs.RawTensor("torch.float32", (2,), bytes(8)),
        opinputs.RawTensor("torch.int64", (), bytes(8)),
    ]
    op = game.op.model_copy(update={"inputs": [t.digest() for t in tensors]})
    return game.model_copy(update={"op": op}), opinputs.encode(tensors)


def test_narrowing_reaches_the_referee_and_the_ruling_decides() -> None:
    game = _to_referee()
    assert game.stage == "referee" and game.op_index == 3 and game.step == 4
    game, data = _with_real_inputs(game)
    game, sha = g.supply_inputs(game, data, 4)
    for outputs, outcome in (
        (game.outputs["island"], "overturned"),
        (game.outputs["auditor"], "upheld"),
        (["0" * 64], "upheld"),
    ):
        ruling = DisputeRuling(
            dispute_id=game.dispute_id, query=game.query, inputs_sha256=sha, outputs=outputs
        )
        decided = g.rule(game, REFEREE, ruling, REFEREES, 5)
        assert decided.outcome == outcome
    with pytest.raises(UnknownRefereeError):
        g.rule(game, AUDITOR, ruling, REFEREES | {AUDITOR}, 5)
    with pytest.raises(UnknownRefereeError):
        g.rule(game, "5" + "X" * 47, ruling, REFEREES, 5)
    with pytest.raises(LateAnswerError):
        g.rule(game, REFEREE, ruling, REFEREES, game.deadline_round + 1)


def test_inputs_that_do_not_match_are_refused() -> None:
    game, data = _with_real_inputs(_to_referee())
    other = opinputs.encode(
        [
            opinputs.RawTensor("torch.float32", (2,), b"\x01" * 8),
            opinputs.RawTensor("torch.int64", (), bytes(8)),
        ]
    )
    for bad in (other, data[:-1], data + b"x", b"nope" + data[4:]):
        with pytest.raises(InputMismatchError):
            g.supply_inputs(game, bad, 4)


def test_traces_parting_before_inputs_agree_uphold() -> None:
    game = narrow_steps(new_game(4, 2), 2)
    game = g.answer(game, ISLAND, layer_answer(game, ISLAND, 0), 2)
    game = g.answer(game, AUDITOR, layer_answer(game, AUDITOR, 0), 2)
    island = op_answer(game, ISLAND, 2)
    auditor = op_answer(game, AUDITOR, 2)
    shifted = auditor.model_copy(update={"ops": auditor.ops[1:]})
    game = g.answer(game, ISLAND, island, 3)
    game = g.answer(game, AUDITOR, shifted, 3)
    assert game.outcome == "upheld"


def test_silent_party_loses_at_the_deadline() -> None:
    game = new_game(8, 3)
    assert g.expire(game, game.deadline_round) == game
    assert g.expire(game, game.deadline_round + 1).outcome == "upheld"  # nobody answered
    answered = g.answer(game, ISLAND, step_answer(game, ISLAND, 3), 1)
    assert g.expire(answered, game.deadline_round + 1).outcome == "overturned"
    referee = _to_referee()
    assert g.expire(referee, referee.deadline_round + 1).outcome == "upheld"  # no inputs
    with_inputs, data = _with_real_inputs(referee)
    with_inputs, _ = g.supply_inputs(with_inputs, data, 4)
    extended = g.expire(with_inputs, with_inputs.deadline_round + 1)
    assert extended.stage == "referee" and extended.deadline_round > with_inputs.deadline_round


def test_bad_answers_are_refused_and_change_nothing() -> None:
    game = new_game(8, 3)
    good = step_answer(game, AUDITOR, 3)
    cases = [
        (NotAPartyError, REFEREE, good, 1),
        (WrongCountError, AUDITOR, good.model_copy(update={"hashes": good.hashes[:-1]}), 1),
        (WrongQueryError, AUDITOR, good.model_copy(update={"segment": 2}), 1),
        (WrongQueryError, AUDITOR, good.model_copy(update={"query": 1}), 1),
        (WrongQueryError, AUDITOR, good.model_copy(update={"level": "layer"}), 1),
        (LateAnswerError, AUDITOR, good, game.deadline_round + 1),
        (WrongAnswerError, ISLAND, good, 1),  # the auditor's end hash is not the island's leaf
    ]
    before = game.model_dump()
    for error, signer, body, now in cases:
        with pytest.raises(error):
            g.answer(game, signer, body, now)
        assert game.model_dump() == before
    once = g.answer(game, AUDITOR, good, 1)
    with pytest.raises(DuplicateAnswerError):
        g.answer(once, AUDITOR, good, 1)


def test_bad_layer_answers_are_refused() -> None:
    game = narrow_steps(new_game(4, 2), 2)
    good = layer_answer(game, ISLAND, 1)
    with pytest.raises(WrongCountError):
        g.answer(game, ISLAND, good.model_copy(update={"sections": good.sections[1:]}), 2)
    with pytest.raises(WrongQueryError):
        g.answer(game, ISLAND, good.model_copy(update={"step": 3}), 2)
    renamed = [s.model_copy(update={"name": "x"}) for s in good.sections]
    with pytest.raises(WrongQueryError):
        g.answer(game, ISLAND, good.model_copy(update={"sections": renamed}), 2)


def test_a_decided_game_refuses_everything() -> None:
    game = g.expire(new_game(8, 3), 100)
    with pytest.raises(DecidedError):
        g.answer(game, ISLAND, step_answer(game, ISLAND, 3), 100)
    with pytest.raises(DecidedError):
        g.supply_inputs(game, b"", 100)


def test_game_round_trips_through_json() -> None:
    game = _to_referee()
    assert g.Game.model_validate_json(game.model_dump_json()) == game
