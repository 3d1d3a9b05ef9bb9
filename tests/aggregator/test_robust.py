"""The reference norm only audits set, copies and updates against the rest left out, the
geometric median (real merge, real codec, real verify-tape)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hypertrain.aggregator.gram import gram_matrix
from hypertrain.aggregator.merge import merge
from hypertrain.aggregator.norms import update_norm
from hypertrain.aggregator.robust import (
    COPY_RESIDUAL,
    find_copies,
    geometric_median,
    loo_cosines,
)
from hypertrain.aggregator.screen import HISTORY_NORMS, proven_history, reference_norm
from hypertrain.aggregator.tape import Tape
from hypertrain.aggregator.verify import verify_tape
from hypertrain.trainer.codec import decode_int8, encode_int8
from hypertrain.trainer.model import param_shapes
from tests.aggregator.helpers import HOTKEYS, World, delta

ROOT = Path(__file__).parents[2]
Tensors = dict[str, torch.Tensor]


def _honest_only(w: World, *indices: int) -> str:
    """The model a merge of only these candidates produces."""
    alone = World()
    alone.candidates = [c for c in w.candidates if c.hotkey in {HOTKEYS[i] for i in indices}]
    alone.blobs = w.blobs
    return merge(alone.inputs(), alone.blobs).tape.new_model_sha256


def _encode(w: World, tensors: Tensors) -> bytes:
    return encode_int8(tensors, w.manifest.compression.block_size)


def _decoded(w: World, index: int) -> Tensors:
    return decode_int8(w.blobs.get(w.candidates[index].update_sha256))


def _norm(w: World, index: int) -> float:
    """The exact norm of candidate ``index``'s update (as the merge computes it)."""
    data = w.blobs.get(w.candidates[index].update_sha256)
    return update_norm(data, param_shapes(w.manifest.model), w.manifest.compression)


def _in_order(w: World) -> None:
    """Commit order = the order the candidates were added."""
    w.candidates = [c.model_copy(update={"seq": i}) for i, c in enumerate(w.candidates)]


def _reasons(w: World, **kw: object) -> dict[str, str]:
    tape = merge(w.inputs(**kw), w.blobs).tape  # type: ignore[arg-type]
    assert verify_tape(tape, w.blobs).identical
    return {e.hotkey: e.reason for e in tape.excluded}


# --- the reference norm ---------------------------------------------------------------


def test_a_1000x_update_beside_one_proven_honest_update_is_rejected() -> None:
    w = World()
    w.add(0)  # honest, audited: match with the update checked
    w.add(1, scale=1.0)  # 1000x, not audited this round
    result = merge(w.inputs(proven=[HOTKEYS[0]]), w.blobs)
    tape = result.tape
    assert [i.hotkey for i in tape.included] == [HOTKEYS[0]]
    assert {e.hotkey: e.reason for e in tape.excluded} == {HOTKEYS[1]: "norm_outlier"}
    assert tape.new_model_sha256 == _honest_only(w, 0)  # the 1000x did not steer the model
    assert verify_tape(tape, w.blobs).identical


def test_a_round_of_unproven_updates_without_history_merges_nothing() -> None:
    """However many agree (three ×1000 sybils and two honest), unaudited updates never set
    their own reference: nothing is merged or paid until an audit proves a norm."""
    w = World()
    w.add(0)
    w.add(1)
    for i in (2, 3, 4):
        w.add(i, scale=1.0)
    tape = merge(w.inputs(proven=[]), w.blobs).tape
    assert tape.included == []
    assert {e.reason for e in tape.excluded} == {"no_reference"}
    assert tape.new_model_sha256 == w.start_sha  # the model is kept as it was


def test_history_sets_the_reference_and_a_round_majority_cannot_move_it() -> None:
    w = World()
    w.add(0)
    honest_norm = merge(w.inputs(), w.blobs).tape.included[0].norm
    for i in (1, 2, 3):  # three of four updates this round are 1000x
        w.add(i, scale=1.0)
    tape = merge(w.inputs(proven=[], history_norms=[honest_norm] * 8), w.blobs).tape
    assert [i.hotkey for i in tape.included] == [HOTKEYS[0]]
    assert tape.median_norm == honest_norm
    assert sorted(e.hotkey for e in tape.excluded) == sorted(HOTKEYS[1:4])
    assert verify_tape(tape, w.blobs).identical


def test_reference_rules() -> None:
    norms = {"a": 1.0, "b": 1000.0}
    assert reference_norm(norms, [], []) is None
    assert reference_norm(norms, [], ["a"]) == 1.0
    assert reference_norm(norms, [2.0, 2.0, 2.0], ["b"]) == 2.0
    assert reference_norm(norms, [], [], anchor=3.0) == 3.0
    assert reference_norm({str(i): 1.0 for i in range(9)}, [], []) is None  # no quorum rule


def test_sybils_merged_every_round_cannot_ratchet_the_reference() -> None:
    """One proven honest island and three unaudited sybils at 1.9x the reference (below
    the clip) every round: the reference is the honest norm in every round."""
    w = World()
    w.add(0)
    for i in (1, 2, 3):
        w.add(i, seed=100 + i, scale=1.9e-3)
    tapes: list[Tape] = []
    for round_ in range(6):
        history = proven_history(reversed(tapes))
        tape = merge(w.inputs(round_, proven=[HOTKEYS[0]], history_norms=history), w.blobs).tape
        tapes.append(tape)
        assert tape.median_norm == tape.included[0].norm  # the honest one, every round
    assert len(proven_history(reversed(tapes))) == 6 <= HISTORY_NORMS
    assert set(proven_history(reversed(tapes))) == {tapes[0].included[0].norm}


# --- copies: explained by earlier updates ----------------------------------------------


def test_a_copied_update_is_merged_once_and_the_earliest_commit_keeps_it() -> None:
    w = World()
    original = w.add(3)  # sorts after the copier's hotkey, but committed first
    data = w.blobs.get(original.update_sha256)
    copier = w.add(0, data=data)
    w.candidates = [original.model_copy(update={"seq": 0}), copier.model_copy(update={"seq": 1})]
    w.add(1)
    w.add(2)
    tape = merge(w.inputs(), w.blobs).tape
    assert HOTKEYS[3] in {i.hotkey for i in tape.included}
    assert {e.hotkey: e.reason for e in tape.excluded} == {HOTKEYS[0]: "duplicate_update"}
    assert tape.new_model_sha256 == _honest_only(w, 1, 2, 3)
    assert verify_tape(tape, w.blobs).identical


def test_rescaled_reversed_noisy_and_averaged_copies_are_near_duplicates() -> None:
    w = World()
    for i in range(3):
        w.add(i)
    a, b = _decoded(w, 0), _decoded(w, 1)
    gen = torch.Generator().manual_seed(77)
    noisy = {k: v + torch.randn(v.shape, generator=gen) * 0.2 * v.std() for k, v in a.items()}
    cos = sum(float((noisy[k] * a[k]).sum()) for k in a) / math.sqrt(
        sum(float(noisy[k].pow(2).sum()) for k in a) * sum(float(a[k].pow(2).sum()) for k in a)
    )
    assert 0.975 < cos < 0.985  # an honest update plus noise, cosine about 0.98
    w.add(3, data=_encode(w, {k: v * 3.0 for k, v in a.items()}))  # rescaled
    w.add(4, data=_encode(w, {k: -v for k, v in b.items()}))  # reversed copy
    w.add(5, data=_encode(w, noisy))
    w.add(6, data=_encode(w, {k: (a[k] + b[k]) / 2 for k in a}))  # the mean of two
    _in_order(w)
    reasons = _reasons(w)
    assert reasons == dict.fromkeys(HOTKEYS[3:7], "near_duplicate")


def test_independent_honest_updates_are_never_copies() -> None:
    w = World()
    for i in range(16):
        w.add(i)
    _in_order(w)
    tape = merge(w.inputs(), w.blobs).tape
    assert tape.excluded == [] and len(tape.included) == 16
    data = [w.blobs.get(c.update_sha256) for c in w.candidates]
    gram = gram_matrix(data, param_shapes(w.manifest.model), w.manifest.compression)
    assert find_copies(gram, range(16)) == []


def test_copy_residuals() -> None:
    """Residual 0 for a combination, the noise share for a noisy copy, ~1 for orthogonal."""
    gram = [[1.0, 0.0, 0.5, 0.98], [0.0, 1.0, 0.5, 0.0], [0.5, 0.5, 0.5, 0.49], [0.98, 0, 0.49, 1]]
    copies = find_copies(gram, [0, 1, 2, 3])
    assert [c.index for c in copies] == [2, 3]
    assert copies[0].residual < 1e-6 and copies[0].basis == (0, 1)
    assert copies[1].residual == pytest.approx(math.sqrt(1 - 0.98**2))
    assert copies[1].residual < COPY_RESIDUAL


# --- against the aggregate, the published attacks --------------------------------------


def test_an_update_reversed_from_its_own_training_points_against_the_others() -> None:
    w = World()
    for i in range(4):
        w.add(i)
    reversed_own = {k: -v for k, v in delta(w.manifest, 9).items()}  # trained, then negated
    w.add(4, data=_encode(w, reversed_own))
    _in_order(w)
    assert _reasons(w) == {HOTKEYS[4]: "against_aggregate"}


@pytest.mark.parametrize("proven", [0, 2])
def test_a_reversed_update_beside_two_honest_ones_does_not_take_them_out(proven: int) -> None:
    """Its own leave-one-out median is the honest mean (cosine well below 0); theirs
    includes it, so the screen removes the worst first and looks again. Unaudited, or
    beside the two honest updates proven (a reversed update never passes its audit)."""
    w = World()
    w.add(0)
    w.add(1)
    w.add(2, data=_encode(w, {k: -v for k, v in delta(w.manifest, 9).items()}))
    _in_order(w)
    history = [] if proven else [_norm(w, 0)] * 8
    reasons = _reasons(w, proven=HOTKEYS[:proven], history_norms=history)
    assert reasons == {HOTKEYS[2]: "against_aggregate"}


@pytest.mark.parametrize("honest", [3, 8, 12])
def test_inner_product_manipulation_is_excluded(honest: int) -> None:
    """IPM (Xie et al. 2019): each attacker sends -eps times the honest mean (here with a
    little noise of its own so it is not a pure combination, and eps = 0.5, 2)."""
    w = World()
    for i in range(honest):
        w.add(i)
    mean = {k: sum(_decoded(w, i)[k] for i in range(honest)) / honest for k in _decoded(w, 0)}
    attackers = max(1, honest // 3)
    for j in range(attackers):
        noise = delta(w.manifest, 500 + j, scale=2e-4)
        eps = (0.5, 2.0)[j % 2]
        w.add(honest + j, data=_encode(w, {k: -eps * v + noise[k] for k, v in mean.items()}))
    _in_order(w)
    reasons = _reasons(w)
    assert set(reasons) == set(HOTKEYS[honest : honest + attackers])
    assert set(reasons.values()) <= {"against_aggregate", "near_duplicate"}


def _cosine(x: Tensors, y: Tensors) -> float:
    dot = sum(float((x[k].double() * y[k].double()).sum()) for k in x)
    nx = sum(float(x[k].double().pow(2).sum()) for k in x)
    ny = sum(float(y[k].double().pow(2).sum()) for k in y)
    return dot / math.sqrt(nx * ny)


@pytest.mark.parametrize(("honest", "attackers"), [(3, 1), (6, 2), (10, 6)])
def test_a_little_is_enough_is_not_detected_but_bounded(honest: int, attackers: int) -> None:
    """ALIE (Baruch et al. 2019): every attacker sends mean - z * std, coordinate-wise, over
    the honest updates (z = 1). No statistic separates it from honest updates at these sizes;
    the aggregate still points along the honest mean and the economics must do the rest
    (docs/mechanism.md)."""
    w = World()
    for i in range(honest):
        w.add(i)
    honest_updates = [_decoded(w, i) for i in range(honest)]
    stacked = {k: torch.stack([u[k] for u in honest_updates]) for k in honest_updates[0]}
    alie = {k: v.mean(0) - v.std(0) for k, v in stacked.items()}
    for j in range(attackers):  # each with its own rounding noise, so no two are equal
        noise = delta(w.manifest, 900 + j, scale=1e-5)
        w.add(honest + j, data=_encode(w, {k: v + noise[k] for k, v in alie.items()}))
    _in_order(w)
    result = merge(w.inputs(), w.blobs)
    assert verify_tape(result.tape, w.blobs).identical
    mean = {k: v.mean(0) for k, v in stacked.items()}
    coef = {i.hotkey: i.weight * i.clip_factor for i in result.tape.included}
    merged = {k: torch.zeros_like(v) for k, v in mean.items()}
    for i, c in enumerate(w.candidates):
        for k, v in _decoded(w, i).items():
            merged[k] += coef.get(c.hotkey, 0.0) * v
    assert _cosine(merged, mean) > 0.8


# --- the geometric median on the Gram matrix -------------------------------------------


def test_geometric_median_resists_a_minority_far_away() -> None:
    """Three points near 1 on a line, two at 100: the median stays by the three."""
    xs = [1.0, 1.1, 0.9, 100.0, 100.0]
    gram = [[x * y for y in xs] for x in xs]
    a = geometric_median(gram, [1.0] * 5)
    assert sum(a) == pytest.approx(1.0)
    z = sum(ai * x for ai, x in zip(a, xs, strict=True))
    assert 0.9 <= z <= 1.1
    assert geometric_median(gram[:2], [1.0, 3.0]) == [0.25, 0.75]  # two: the weighted mean


def test_leave_one_out_cosines() -> None:
    gram = [[1.0, 0.4, 0.4, -1.0], [0.4, 1.0, 0.4, -0.4], [0.4, 0.4, 1.0, -0.4]]
    gram.append([-1.0, -0.4, -0.4, 1.0])
    cos = loo_cosines(gram, [1.0] * 4)
    assert all(c > 0.3 for c in cos[1:3]) and cos[3] < -0.3
    assert loo_cosines([[1.0]], [1.0]) == [1.0]


def test_gram_is_exact_and_symmetric() -> None:
    w = World()
    for i in range(3):
        w.add(i)
    data = [w.blobs.get(c.update_sha256) for c in w.candidates]
    shapes = param_shapes(w.manifest.model)
    gram = gram_matrix(data, shapes, w.manifest.compression)
    for i in range(3):
        assert gram[i][i] == pytest.approx(update_norm(data[i], shapes) ** 2, rel=1e-15)
        for j in range(3):
            assert gram[i][j] == gram[j][i]
            ref = _cosine(_decoded(w, i), _decoded(w, j)) * math.sqrt(gram[i][i] * gram[j][j])
            assert gram[i][j] == pytest.approx(ref, rel=1e-9)


def test_robust_merge_is_bitwise_reproducible_across_processes() -> None:
    """Copies, a reversed update and the median over six updates, in two processes."""
    script = (
        "from tests.aggregator.test_robust import _attacked_world\n"
        "from hypertrain.aggregator.merge import merge\n"
        "w = _attacked_world()\n"
        "r = merge(w.inputs(), w.blobs)\n"
        "print(r.tape.sha256(), r.tape.new_model_sha256)\n"
    )
    other = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    w = _attacked_world()
    r = merge(w.inputs(), w.blobs)
    assert other.stdout.split() == [r.tape.sha256(), r.tape.new_model_sha256]
    assert {e.reason for e in r.tape.excluded} == {"near_duplicate", "against_aggregate"}
    assert [i.weight for i in r.tape.included] != [0.25] * 4  # the median, not the mean


def _attacked_world() -> World:
    w = World()
    for i in range(4):
        w.add(i, tokens=100 + 40 * i, scale=1e-3 * (1 + i / 4))
    a, b = _decoded(w, 0), _decoded(w, 1)
    w.add(4, data=_encode(w, {k: (a[k] + b[k]) / 2 for k in a}))
    w.add(5, data=_encode(w, {k: -v for k, v in delta(w.manifest, 9).items()}))
    _in_order(w)
    return w
