"""The referee's one-operation recompute (``referee.recompute``): it reproduces every traced
operation of a step from its inputs, and refuses inputs that are not the agreed ones."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from hypertrain.dispute.errors import InputMismatchError
from hypertrain.evidence.party import SegmentParty
from hypertrain.evidence.trace import OpRef
from hypertrain.referee.recompute import recompute
from hypertrain.trainer.state import init_state
from tests.trainer.conftest import make_config, make_samples


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _party() -> SegmentParty:
    """An honest party of one segment (J = 4 steps) of a tiny model."""
    config = make_config()
    start = init_state(config.state_config(), seed=7)
    return SegmentParty(start, config, make_samples(4 * config.samples_per_step))


def test_recompute_reproduces_operations_across_a_step() -> None:
    party = _party()
    trace = party.trace(0)
    for section in (0, len(trace.names) - 1):
        for index in range(0, len(trace.ops[section]), 13):
            entry = trace.ops[section][index]
            data = party.op_inputs_at(OpRef(0, section, index))
            assert recompute(entry, data) == entry.outputs, (section, index, entry.op)


def test_recompute_refuses_inputs_that_are_not_the_agreed_ones() -> None:
    party = _party()
    entry = party.trace(0).ops[0][3]
    data = bytearray(party.op_inputs_at(OpRef(0, 0, 3)))
    data[-1] ^= 1
    with pytest.raises(InputMismatchError):
        recompute(entry, bytes(data))
