"""The score window holds the time an evaluator may take for one model: the spec states
that limit (``cycle.model_time_limit_s``), the evaluator applies it (a longer
``--time-limit-s`` is refused), and a window shorter than it is refused."""

from __future__ import annotations

import pytest

from hypertrain.competition.spec import CompetitionSpec, check_score_window
from hypertrain.evaluator.cli import time_limit_s
from hypertrain.evaluator.sandbox import default_limits
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


def test_the_evaluator_scores_within_the_specs_limit() -> None:
    spec = _spec(score_window_rounds=20, model_time_limit_s=60)
    assert default_limits(spec).time_s == 60
    assert time_limit_s(None, 60) == 60 and time_limit_s(30, 60) == 30
    with pytest.raises(ValueError, match=r"exceeds the spec's cycle\.model_time_limit_s"):
        time_limit_s(600, 60)
