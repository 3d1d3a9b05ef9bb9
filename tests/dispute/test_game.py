"""The dispute state machine: narrowing, outcomes, deadlines and every refusal.

A recompute dispute is in test_recompute.py; which check a dispute contests in
test_admissible.py."""

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
from hypertrain.dispute.messages import DisputeRuling, commitment_of
from hypertrain.dispute.resolution import expire, recomputed, rule, supply_inputs
from tests.dispute.helpers import (
    AUDITOR,
    ISLAND,
    REFEREE,
    commit,
    committed,
    layer_answer,
    narrow_steps,
    new_game,
    op_answer,
    play,
    reveal,
    salted,
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
    assert game.query == 9  # ceil(log2 500) queries, two commitments and two reveals each
    assert game.messages == 1 + 36


def test_auditor_agreeing_at_j_overturns() -> None:
    game = narrow_steps(new_game(8, part_at=9), 9)  # the parties never part
    assert game.stage == "decided" and game.outcome == "overturned"


def _to_referee(bad_section: int = 2, bad_op: int = 3) -> g.Game:
    game = narrow_steps(new_game(8, 5), 5)
    game = play(game, layer_answer(game, ISLAND, bad_section),
                layer_answer(game, AUDITOR, bad_section), 2)  # fmt: skip
    assert game.stage == "op" and game.section == bad_section
    return play(game, op_answer(game, ISLAND, bad_op), op_answer(game, AUDITOR, bad_op), 3)


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
    game, sha = supply_inputs(game, data, 4)
    for outputs, outcome in (
        (game.outputs["island"], "overturned"),
        (game.outputs["auditor"], "upheld"),
        (["0" * 64], "upheld"),
    ):
        ruling = DisputeRuling(
            dispute_id=game.dispute_id, query=game.query, inputs_sha256=sha, outputs=outputs
        )
        decided = rule(game, REFEREE, ruling, REFEREES, 5)
        assert decided.outcome == outcome
        assert (decided.steps[-1].level, decided.steps[-1].actor) == ("decided", "referee")
    with pytest.raises(UnknownRefereeError):
        rule(game, AUDITOR, ruling, REFEREES | {AUDITOR}, 5)
    with pytest.raises(UnknownRefereeError):
        rule(game, "5" + "X" * 47, ruling, REFEREES, 5)
    with pytest.raises(LateAnswerError):
        rule(game, REFEREE, ruling, REFEREES, game.deadline_round + 1)


def test_narrowing_steps_are_typed() -> None:
    game = _to_referee()
    levels = [s.level for s in game.steps]
    assert levels == ["open", "step", "step", "step", "layer", "op", "referee"]
    layer, op, waiting = game.steps[-3:]
    assert (layer.step, layer.section) == (4, game.sections[2])
    assert (op.section, op.operation, op.op_index) == (game.sections[2], "aten.mm.default", 3)
    assert waiting.deadline_round == game.deadline_round and waiting.actor == "both"
    decided = expire(game, game.deadline_round + 1)
    assert decided.steps[-1].level == "decided" and decided.steps[-1].outcome == "upheld"


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
            supply_inputs(game, bad, 4)


def test_traces_parting_before_inputs_agree_go_to_a_reaudit() -> None:
    """Neither party wins on traces that cannot tell them apart (a liar could make them
    so): the game becomes a ``recompute`` game that other auditors decide, within the
    game's bound, and stands as the verdict only when no re-audit comes."""
    game = narrow_steps(new_game(4, 2), 2)
    game = play(game, layer_answer(game, ISLAND, 0), layer_answer(game, AUDITOR, 0), 2)
    auditor = op_answer(game, AUDITOR, 2)
    shifted = auditor.model_copy(update={"ops": auditor.ops[1:]})
    game = play(game, op_answer(game, ISLAND, 2), shifted, 3)
    assert game.stage == "recompute" and game.outcome is None
    assert game.steps[-1].level == "recompute" and "inputs agree" in game.steps[-1].reason
    assert game.deadline_round == game.steps[0].beacon_round + game.rules.bound_rounds() - 1
    assert recomputed(game, REFEREE, "match", 4).stage == "recompute"  # not a juror
    assert recomputed(game, REFEREE, "match", 4, REFEREES).outcome == "overturned"
    assert recomputed(game, REFEREE, "mismatch", 4, REFEREES).outcome == "upheld"
    juried = game.model_copy(update={"jury": ("5Juror1",)})
    assert recomputed(juried, "5Juror1", "match", 4).outcome == "overturned"  # its quorum
    assert expire(game, game.deadline_round + 1).outcome == "upheld"


def test_silent_party_loses_at_the_deadline() -> None:
    game = new_game(8, 3)
    assert expire(game, game.deadline_round) == game
    assert expire(game, game.deadline_round + 1).outcome == "upheld"  # nobody committed
    answered = commit(game, ISLAND, step_answer(game, ISLAND, 3), 1)
    assert expire(answered, game.deadline_round + 1).outcome == "overturned"
    both = committed(game, step_answer(game, ISLAND, 3), step_answer(game, AUDITOR, 3), 1)
    revealed = reveal(both, AUDITOR, step_answer(game, AUDITOR, 3), 2)
    late = expire(revealed, both.deadline_round + 1)  # the island committed, never revealed
    assert late.outcome == "upheld" and "reveal" in late.reason
    referee = _to_referee()
    assert expire(referee, referee.deadline_round + 1).outcome == "upheld"  # no inputs


def test_referee_stage_is_extended_a_bounded_number_of_times_then_upheld() -> None:
    with_inputs, data = _with_real_inputs(_to_referee())
    game, _ = supply_inputs(with_inputs, data, 4)
    extensions = game.rules.referee_extensions
    for n in range(1, extensions + 1):
        game = expire(game, game.deadline_round + 1)
        assert game.stage == "referee" and game.extensions == n
    decided = expire(game, game.deadline_round + 1)
    assert decided.outcome == "upheld" and decided.steps[-1].actor == "deadline"
    assert [s.level for s in decided.steps].count("referee") == 1 + extensions


def test_answering_at_the_last_moment_is_bounded_by_the_clock() -> None:
    """Each party sends every message at the last round it may: the clocks bound the game."""
    rules = g.Rules(answer_rounds=5, referee_rounds=5, clock_rounds=12, referee_extensions=1)
    game = new_game(512, 300, rules=rules)
    phases = 0
    while game.stage == "step":
        answers = {ISLAND: step_answer(game, ISLAND, 300), AUDITOR: step_answer(game, AUDITOR, 300)}
        due = [(game.party_deadline(game.role_of(k)), k) for k in answers]
        at, signer = min((t, k) for t, k in due if game.due(game.role_of(k)))
        phases += not game.revealing and not game.commitments
        send = reveal if game.revealing else commit
        game = send(game, signer, answers[signer], at)
    assert game.stage == "layer" and game.step == 299  # the narrowing still finished
    unclocked = phases * 2 * rules.answer_rounds  # what the per-message deadline alone allows
    assert game.phase_opened <= 2 * rules.clock_rounds < unclocked
    assert max(game.clock_used.values()) <= rules.clock_rounds
    assert rules.bound_rounds() == 2 * 12 + 5 * 2


def test_commitments_hide_answers_until_both_committed() -> None:
    game = new_game(8, 3)
    island, auditor = step_answer(game, ISLAND, 3), step_answer(game, AUDITOR, 3)
    once = commit(game, AUDITOR, auditor, 1)
    assert once.answers == {} and auditor.hashes[0] not in once.model_dump_json()
    with pytest.raises(WrongQueryError):  # nobody reveals before both committed
        reveal(once, AUDITOR, auditor, 1)
    with pytest.raises(WrongQueryError):  # a commitment carries no answer
        g.answer(once, ISLAND, commitment_of(salted(island)).model_copy(
            update={"hashes": island.hashes}), 1)  # fmt: skip
    with pytest.raises(DuplicateAnswerError):
        commit(once, AUDITOR, auditor, 1)
    both = commit(once, ISLAND, island, 1)
    copied = auditor.model_copy(update={"hashes": [*auditor.hashes[:-1], island.hashes[-1]]})
    with pytest.raises(WrongAnswerError):  # a reveal must be what was committed
        reveal(both, ISLAND, copied, 1)
    with pytest.raises(WrongAnswerError):
        g.answer(both, ISLAND, salted(island, "00" * 32), 1)


def test_bad_answers_are_refused_and_change_nothing() -> None:
    game = new_game(8, 3)
    good = step_answer(game, AUDITOR, 3)
    cases = [
        (NotAPartyError, REFEREE, good),
        (WrongCountError, AUDITOR, good.model_copy(update={"hashes": good.hashes[:-1]})),
        (WrongQueryError, AUDITOR, good.model_copy(update={"segment": 2})),
        (WrongQueryError, AUDITOR, good.model_copy(update={"query": 1})),
        (WrongQueryError, AUDITOR, good.model_copy(update={"level": "layer"})),
        (WrongAnswerError, ISLAND, good),  # the auditor's end hash is not the island's leaf
    ]
    before = game.model_dump()
    for error, signer, body in cases:  # refused at the commitment or at the reveal
        party = AUDITOR if signer == REFEREE else signer
        other = ISLAND if party == AUDITOR else AUDITOR
        with pytest.raises(error):
            ready = commit(game, other, step_answer(game, other, 3), 1)
            ready = commit(ready, party, body, 1)
            reveal(ready, signer, body, 1)
        assert game.model_dump() == before
    with pytest.raises(LateAnswerError):
        commit(game, AUDITOR, good, game.deadline_round + 1)


def test_bad_layer_answers_are_refused() -> None:
    game = narrow_steps(new_game(4, 2), 2)
    good = layer_answer(game, ISLAND, 1)
    other = layer_answer(game, AUDITOR, 1)
    bad = [
        (WrongCountError, good.model_copy(update={"sections": good.sections[1:]})),
        (WrongQueryError, good.model_copy(update={"step": 3})),
        (WrongQueryError, good.model_copy(
            update={"sections": [s.model_copy(update={"name": "x"}) for s in good.sections]})),
    ]  # fmt: skip
    for error, body in bad:
        with pytest.raises(error):
            reveal(committed(game, body, other, 2), ISLAND, body, 2)


def test_a_decided_game_refuses_everything() -> None:
    game = expire(new_game(8, 3), 100)
    with pytest.raises(DecidedError):
        commit(game, ISLAND, step_answer(game, ISLAND, 3), 100)
    with pytest.raises(DecidedError):
        supply_inputs(game, b"", 100)


def test_game_round_trips_through_json() -> None:
    game = _to_referee()
    assert g.Game.model_validate_json(game.model_dump_json()) == game
