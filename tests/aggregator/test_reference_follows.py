"""The norm reference follows the round's honest norms down late in a run, never up.

docs/threats.md, "Norm reference late in a run": the proven pool is mostly probation
rounds' norms, from the schedule's peak; honest norms fall about tenfold as the learning
rate decays, few audits refresh the pool, and an honest island's last-round update
(norm 0.308 against a bound of 0.311) was excluded ``norm_outlier``. The round's own
norms may now lower the reference, at most ``sqrt(reject_norm_factor)``-fold, never
raise it (``screen.followed_reference``). Real merges, real codec, and ``verify-tape``
recomputes each tape.
"""

from __future__ import annotations

import math

import pytest

from hypertrain.aggregator.merge import merge
from hypertrain.aggregator.norms import update_norm
from hypertrain.aggregator.screen import followed_reference
from hypertrain.aggregator.tape import Tape
from hypertrain.aggregator.verify import verify_tape
from hypertrain.trainer.model import param_shapes
from tests.aggregator.helpers import HOTKEYS, World

ROOT_F = math.sqrt(10.0)  # sqrt of the default reject_norm_factor


def _norm(w: World, i: int) -> float:
    data = w.blobs.get(w.candidates[i].update_sha256)
    return update_norm(data, param_shapes(w.manifest.model), w.manifest.compression)


def _merged(w: World, history: list[float], proven: list[str]) -> Tape:
    tape = merge(w.inputs(proven=proven, history_norms=history), w.blobs).tape
    assert verify_tape(tape, w.blobs).identical  # the rule is the tape's, recomputed
    return tape


def test_late_honest_updates_below_a_stale_proven_reference_are_merged() -> None:
    """Probation-era proven norms 10.5x today's honest ones: every honest update lay
    under ``p / 10`` and was refused ``norm_outlier``; now all four are merged."""
    w = World()
    for i in range(4):
        w.add(i)
    norms = [_norm(w, i) for i in range(4)]
    stale = [10.5 * max(norms)] * 16  # the history: 16 proven norms from probation
    tape = _merged(w, stale, proven=[])
    assert tape.excluded == [], tape.excluded
    assert sorted(i.hotkey for i in tape.included) == sorted(HOTKEYS[:4])
    assert tape.median_norm == stale[0] / ROOT_F  # lowered as far as the bound allows
    assert all(i.clip_factor == 1.0 for i in tape.included)


def test_the_round_can_lower_the_reference_only_within_its_bound() -> None:
    """Three unaudited sybils at 1/1000 of the proven norm hold the round's median: the
    reference falls by ``sqrt(10)`` only, the honest update at the proven norm is still
    merged (clipped to ``2 / sqrt(10)`` of it), and the sybils are outliers."""
    w = World()
    w.add(0)
    for i in (1, 2, 3):
        w.add(i, seed=100 + i, scale=1e-6)
    honest = _norm(w, 0)
    tape = _merged(w, [honest] * 8, proven=[])
    assert [i.hotkey for i in tape.included] == [HOTKEYS[0]]
    assert {e.hotkey: e.reason for e in tape.excluded} == dict.fromkeys(
        HOTKEYS[1:4], "norm_outlier"
    )
    assert tape.median_norm == honest / ROOT_F
    assert tape.included[0].clip_factor == pytest.approx(2 / ROOT_F)


def test_the_round_never_raises_the_reference() -> None:
    """A majority at 5x the proven norm (inside the band) leaves the reference at ``p``."""
    w = World()
    w.add(0)
    for i in (1, 2, 3):
        w.add(i, seed=200 + i, scale=5e-3)
    honest = _norm(w, 0)
    tape = _merged(w, [honest] * 8, proven=[HOTKEYS[0]])
    assert tape.median_norm == honest
    assert len(tape.included) == 4  # the large ones are clipped to 2p, not trusted
    assert all(i.clip_factor < 0.5 for i in tape.included if i.hotkey != HOTKEYS[0])


def test_followed_reference_rule() -> None:
    assert followed_reference(3.0, {"a": 0.3, "b": 0.4, "c": 0.5}, 9.0) == 1.0  # 3 / sqrt 9
    assert followed_reference(3.0, {"a": 2.0, "b": 2.5, "c": 0.1}, 9.0) == 2.0
    assert followed_reference(3.0, {"a": 30.0, "b": 40.0}, 9.0) == 3.0  # never raised
    assert followed_reference(3.0, {"a": 0.0, "b": 2.0, "c": 0.0}, 9.0) == 2.0  # zeros skip
    assert followed_reference(3.0, {}, 9.0) == 1.0  # nothing in the round: the floor
