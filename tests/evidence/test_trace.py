"""Step traces (``evidence.trace``) and the narrowing they drive between two parties
(``evidence.party``): a traced step is the step, and a perturbed operation is found at its
step, section and index (the referee's recompute: tests/referee/test_recompute.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from hypertrain.challenge.dashboard.panels import narrowing_row
from hypertrain.dispute import game as g
from hypertrain.dispute.messages import DisputeRuling
from hypertrain.dispute.resolution import rule, supply_inputs
from hypertrain.evidence.party import SegmentParty
from hypertrain.evidence.trace import OpRef, traced_step
from hypertrain.honeypot.perturb import perturbed_ops
from hypertrain.referee.recompute import recompute
from hypertrain.trainer.segment import TrainConfig, samples_to_batch
from hypertrain.trainer.state import init_state
from hypertrain.trainer.step import train_step
from tests.dispute.helpers import AUDITOR, ISLAND, REFEREE, play
from tests.trainer.conftest import make_config, make_samples

J = 4


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _party(config: TrainConfig, perturb: OpRef | None = None) -> SegmentParty:
    start = init_state(config.state_config(), seed=7)
    samples = make_samples(J * config.samples_per_step)
    if perturb is None:
        return SegmentParty(start, config, samples)
    ops = perturbed_ops(start.step + perturb.step, perturb)
    return SegmentParty(start, config, samples, op_hooks=ops)


@pytest.mark.parametrize("layout", [(1, 1, 4), (2, 2, 2)])
def test_traced_step_is_train_step(layout: tuple[int, int, int]) -> None:
    config = make_config(layout=layout)
    state = init_state(config.state_config(), seed=3)
    batch = samples_to_batch(make_samples(config.samples_per_step), config)
    plain = {k: v.clone() for k, v in state.tensors.items()}
    traced = {k: v.clone() for k, v in state.tensors.items()}
    train_step(plain, 0, batch, config.model, config.inner, config.layout)
    trace = traced_step(traced, 0, batch, config.model, config.inner, config.layout)
    assert all(torch.equal(plain[k], traced[k]) for k in plain)
    count = layout[0] * layout[1]
    assert trace.names == g.section_names(config.model.num_layers, count)
    assert all(trace.ops)  # every section holds operations


def _play(island: SegmentParty, auditor: SegmentParty) -> g.Game:
    start = island.start.state_hash().hex()
    game = g.open_game(
        dispute_id="d" * 64,
        run_id="run",
        round=0,
        segment=0,
        island=ISLAND,
        auditor=AUDITOR,
        interval=J,
        sections=g.section_names(island.config.model.num_layers, 1),
        start_hash=start,
        island_end=island.state_hashes([J])[0],
        rules=g.Rules(),
        now=0,
    )
    while game.stage in ("step", "layer", "op"):  # each query: both commit, then reveal
        game = play(game, island.answer(game), auditor.answer(game), 1)
    return game


def test_narrowing_names_the_perturbed_step_layer_and_operation() -> None:
    config = make_config()
    where = OpRef(step=2, section=1, index=5)  # layers.1, its sixth operation
    cheat, honest = _party(config, perturb=where), _party(config)
    game = _play(cheat, honest)
    assert game.stage == "referee"
    assert (game.step, game.section, game.op_index) == (2, 1, 5)
    assert game.sections[1] == "mb0.layers.1"
    data = honest.op_inputs(game)
    assert data == cheat.op_inputs(game)  # inputs agree: the difference is this operation
    game, sha = supply_inputs(game, data, 2)
    assert game.op is not None
    outputs = recompute(game.op, data)
    assert outputs == game.outputs["auditor"] != game.outputs["island"]
    ruling = DisputeRuling(
        dispute_id=game.dispute_id, query=game.query, inputs_sha256=sha, outputs=outputs
    )
    decided = rule(game, REFEREE, ruling, frozenset({REFEREE}), 3)
    assert decided.outcome == "upheld"
    # the panel renders the game's own typed steps, the decided one included
    rows = [narrowing_row(step).model_dump() for step in decided.steps]
    levels = [r["level"] for r in rows]
    assert levels[0] == "open" and levels[-4:] == ["layer", "op", "referee", "decided"]
    assert set(levels[1:-4]) == {"step"} and len(levels[1:-4]) == decided.query - 2
    last_step = rows[levels.index("layer") - 1]
    assert (last_step["lo"], last_step["hi"]) == (2, 3)
    assert (rows[-4]["step"], rows[-4]["section"]) == (2, "mb0.layers.1")
    assert (rows[-3]["operation"], rows[-3]["op_index"]) == (game.op.op, 5)
    assert rows[-1]["actor"] == "referee" and rows[-1]["outcome"] == "upheld"
    assert rows[-1]["section"] == "mb0.layers.1" and rows[-1]["text"].endswith(decided.reason)


def test_a_perturbed_update_is_found_in_the_update_section() -> None:
    config = make_config()
    update = len(g.section_names(config.model.num_layers, 1)) - 1
    game = _play(_party(config), _party(config, perturb=OpRef(step=0, section=update, index=3)))
    assert (game.step, game.section, game.op_index) == (0, update, 3)
    assert game.outputs["island"] != game.outputs["auditor"]


def test_honest_parties_agree_and_the_verdict_is_overturned() -> None:
    config = make_config()
    game = _play(_party(config), _party(config))
    assert game.outcome == "overturned"
