"""The score window holds the time an evaluator may take for one model: the spec states
that limit (``cycle.model_time_limit_s``) and a window shorter than it is refused (the
evaluator applies it: tests/evaluator/test_cli.py)."""

from __future__ import annotations

import pytest

from hypertrain.competition.spec import CompetitionSpec, check_score_window
from hypertrain.protocol.errors import DeadlineError
from tests.competition.world import spec_doc


def _spec(**cycle: float) -> CompetitionSpec:
    return CompetitionSpec.model_validate(spec_doc(cycle=cycle))


def test_the_default_window_holds_the_default_limit_on_quicknet() -> None:
    spec = _spec()
    assert (spec.cycle.score_window_rounds, spec.cycle.model_time_limit_s) == (240, 600)
    check_score_window(spec, 3)
    assert "model_time_limit_s" not in spec.canonical().decode()  # older specs keep their hash
    with pytest.raises(DeadlineError, match="at least 600"):  # a 1 s beacon needs 600 rounds
        check_score_window(spec, 1)


def test_a_short_window_is_refused_unless_the_limit_fits_it() -> None:
    with pytest.raises(DeadlineError, match="score_window_rounds = 20 is 60 s"):
        check_score_window(_spec(score_window_rounds=20), 3)
    check_score_window(_spec(score_window_rounds=20, model_time_limit_s=60), 3)
