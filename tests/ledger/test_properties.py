"""Property tests: random op sequences keep every invariant and are idempotent."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hypertrain.ledger import Ledger
from tests.ledger.ops import Driver, Op, check_invariants

tokens = st.dictionaries(st.integers(0, 4), st.integers(0, 60), max_size=4)
holds = st.dictionaries(st.integers(0, 4), st.integers(1, 3), max_size=2)  # probation left
op_strategy: st.SearchStrategy[Op] = st.one_of(
    st.tuples(st.just("settle"), st.integers(0, 1), st.sampled_from([0, 0, 1, 2]), tokens, holds),
    st.tuples(st.just("fault"), st.integers(0, 1), st.integers(0, 3), st.integers(0, 4)),
    st.tuples(st.just("dereg"), st.integers(0, 4)),
    st.tuples(st.just("weights"), st.integers(0, 31)),
    st.tuples(st.just("tick")),
    st.tuples(st.just("bond"), st.integers(0, 1), st.integers(0, 4), st.integers(1, 400)),
    st.tuples(st.just("unbond"), st.integers(0, 7), st.booleans()),
)


def _heads(ledger: Ledger) -> list[str]:
    return [ledger.summary(r).head_hash for r in ledger.runs()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op_strategy, max_size=30))
def test_random_sequences_keep_invariants(ops: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "l.sqlite3") as ledger:
        driver = Driver(ledger)
        driver.setup()
        for op in ops:
            driver.apply(op)
            check_invariants(ledger)
        report = ledger.verify()
        assert report.ok, report.render()
        heads = _heads(ledger)
        # the whole sequence again: every op is a no-op now
        replay = Driver(ledger, bond_refused=driver.bond_refused)
        replay.setup()
        for op in ops:
            replay.apply(op)
        assert _heads(ledger) == heads
