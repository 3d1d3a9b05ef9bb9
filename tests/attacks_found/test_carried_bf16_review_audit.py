"""A cheating island under ``carried_dtype: bfloat16``, against the real trainer and
auditor (an attacker review; every defence here held).

Two rounds of one island under ``carry`` (J = H / 2, both segments audited) with its
optimizer slots carried in bfloat16 (tests/attacks_found/carried_state_review.py plays
them): the honest chain matches and its auditor stores the rounded state; an island that
keeps its unrounded moments for itself is a leaf-0 ``mismatch`` on every audit of the
next round, whichever segments are drawn; a round-0 index naming bfloat16 slots other
than the rounded final moments (truncated instead of rounded, one ulp off, a planted
negative zero or subnormal, a negative second moment, NaN/Inf patterns, the
float32 width) is a ``mismatch`` on the ``update`` check whenever round 0's final segment
is replayed, and round 1's audit is a typed verdict, never an exception: ``unverifiable``
where the state is not a valid carried state of the run, otherwise the documented residual
(a fake made in an unaudited round carries through a valid chain link).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pydantic import ValidationError

from hypertrain.auditor.runner import judge_and_post
from hypertrain.evidence.verify import verify_round_open
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.trainer.carried import (
    CarriedState,
    carried_size,
    decode_carried,
    encode_carried,
    slot_dtype,
)
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.start_state import carried_of, carry_state
from tests.attacks_found.carried_bf16_review import (
    bf16_bits,
    bf16_world,
    float32_bits,
    forged_bits,
    rne_reference,
)
from tests.attacks_found.carried_state_review import (
    ROSTER,
    Service,
    TwoRounds,
    assignment,
    auditor,
    resealed,
    two_rounds,
)
from tests.auditor.islands import MemoryRelay, Published, publish_round
from tests.auditor.world import ISLANDS, World, make_world

ISLAND = ISLANDS[0]


@pytest.fixture(scope="module")
def made(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("carried-bf16"))


@pytest.fixture(scope="module")
def world(made: World) -> World:
    return bf16_world(made)


def _quiet(*_: Any, **__: Any) -> None:
    return None


def _verdict(world: World, two: TwoRounds, index: int, segments: list[int] | None = None) -> Any:
    """The auditor's verdict on the island's round ``index`` (posted, stores included)."""
    details = two.details()
    service = Service(details)
    job = assignment(index, ISLAND, world)
    if segments is not None:
        job = AuditAssignment(round=index, hotkey=ISLAND.ss58_address, segments=segments,
                              selection_beacon_round=1)  # fmt: skip
    outcome = judge_and_post(auditor(world, two.relay, service), details[index], job, _quiet)
    return outcome, service


def _fresh_relay(world: World) -> MemoryRelay:
    relay = MemoryRelay()
    relay.put(world.model_blob)
    return relay


def test_the_honest_chain_matches_and_its_auditor_stores_the_rounded_state(
    world: World, tmp_path: Path
) -> None:
    """The baseline every attack below is measured against: both rounds ``match``; the
    stored state is the island's own bytes, its slots the final moments rounded to
    nearest-even (the reference, integer arithmetic), half the bytes of a float32 one."""
    relay = _fresh_relay(world)
    two = two_rounds(world, tmp_path, relay=relay)
    outcome, service = _verdict(world, two, 0)
    assert outcome.result == "match" and outcome.update_checked, outcome.detail
    assert hashlib.sha256(outcome.carried).hexdigest() == two.r0.index.carried
    config = TrainConfig.from_manifest(world.manifest).state_config()
    assert len(outcome.carried) == carried_size(config)
    stored = decode_carried(outcome.carried, config)
    changed = 0
    for name, t in stored.tensors.items():
        final = two.r0.result.final.tensors[name]
        assert t.dtype == torch.bfloat16
        want = rne_reference(float32_bits(final).ravel())
        assert np.array_equal(bf16_bits(t).ravel(), want)
        changed += int((t.float() != final).sum())
    assert changed > 0  # the rounding is real: the unrounded state is another state
    later, _ = _verdict(world, two, 1)
    assert later.result == "match", later.detail
    assert [v["result"] for v in service.verdicts] == ["match"]


def _unrounded(two: TwoRounds, world: World) -> Any:
    """Round 1's start as an island that keeps its float32 moments would have it."""
    config = TrainConfig.from_manifest(world.manifest, round_index=1).state_config()
    kept = carried_of(two.r0.result.final, two.r0.start_params, world.manifest.compression)
    assert all(t.dtype == torch.float32 for t in kept.tensors.values())
    return carry_state(kept, two.r0.start_params, config)


@pytest.mark.parametrize("segments", [[0], [1], [0, 1]])
def test_an_island_keeping_its_unrounded_moments_is_caught_on_every_audit(
    world: World, tmp_path: Path, segments: list[int]
) -> None:
    """It uploads (and names) the honest rounded carried state but trains round 1 from
    its own unrounded moments: leaf 0 is the hash of a state no replay derives, checked on
    every audit whatever segments are drawn (the rate is the audit rate ``q``)."""
    relay = _fresh_relay(world)
    honest = two_rounds(world, tmp_path / "h", relay=relay)
    start = _unrounded(honest, world)
    assert start.state_hash() != honest.start1.state_hash()
    opens = [verify_round_open(e.model_dump(), world.manifest, i)
             for i, e in enumerate(honest.opens)]  # fmt: skip
    r1 = publish_round(world, relay, ISLAND, opens, tmp_path / "u", start=start)
    two = TwoRounds(relay, honest.opens, honest.r0, r1, honest.start1)
    outcome, service = _verdict(world, two, 1, segments)
    assert (outcome.result, outcome.first_bad_leaf) == ("mismatch", 0), outcome.detail
    assert "start state" in outcome.detail
    assert [v["result"] for v in service.verdicts] == ["mismatch"]


def _truncated(two: TwoRounds) -> Callable[[str, np.ndarray], np.ndarray]:
    def change(name: str, _bits: np.ndarray) -> np.ndarray:
        final = float32_bits(two.r0.result.final.tensors[name]).ravel()
        return (final >> 16).astype(np.uint16)  # toward zero, not to nearest-even

    return change


def _one_ulp(_name: str, bits: np.ndarray) -> np.ndarray:
    out = bits.copy()
    out[len(out) // 3] += 1
    return out


def _first_to(pattern: int) -> Callable[[str, np.ndarray], np.ndarray]:
    """Each slot's first value replaced by ``pattern`` (an honest tiny run's moments
    hold no zero, so -0 and subnormals are planted, not flipped)."""

    def change(_name: str, bits: np.ndarray) -> np.ndarray:
        out = bits.copy()
        out[0] = pattern
        return out

    return change


def _negative_second_moment(name: str, bits: np.ndarray) -> np.ndarray:
    return bits | 0x8000 if "exp_avg_sq" in name else bits


FINITE: dict[str, Any] = {
    "truncated": _truncated,
    "one-ulp": lambda _two: _one_ulp,
    "negative-zero": lambda _two: _first_to(0x8000),
    "subnormal": lambda _two: _first_to(0x0001),
    "negative-second-moment": lambda _two: _negative_second_moment,
}


@pytest.mark.parametrize("case", sorted(FINITE))
def test_chosen_finite_bfloat16_slots_are_caught_by_the_round_that_made_them(
    world: World, tmp_path: Path, case: str
) -> None:
    """Round 0's index names finite bfloat16 slots other than the rounded final moments
    (each one differs from the honest state in at least one bit): an audit of round 0 is
    a ``mismatch`` on the ``update`` check and stores nothing. Round 1, trained from the
    start derived from the chosen state, is judged with a typed verdict, never an
    exception (``match`` where it trained finitely: the documented residual)."""
    relay = _fresh_relay(world)
    honest = two_rounds(world, tmp_path / "h", relay=relay)
    assert honest.r0.index.carried is not None
    change = FINITE[case](honest)

    def round0(r: MemoryRelay, pub: Published) -> Published:
        assert pub.index.carried is not None
        name = forged_bits(r, world, pub.index.carried, change)
        assert name != pub.index.carried, "the forgery changed nothing"
        return resealed(world, r, ISLAND, pub, name)

    # a negative second moment makes the island's own round 1 NaN (no update encodes):
    # it commits an update of its choosing (its round-0 one) over its NaN checkpoints
    chosen = None
    if case == "negative-second-moment":
        chosen = lambda r, pub: r.blobs[pub.commit.update_sha256]  # noqa: E731
    two = two_rounds(world, tmp_path / "c", relay=relay, round0=round0, round1_update=chosen)
    outcome, service = _verdict(world, two, 0)
    assert (outcome.result, outcome.check) == ("mismatch", "update"), outcome.detail
    assert outcome.carried is None and [v["result"] for v in service.verdicts] == ["mismatch"]
    later, _ = _verdict(world, two, 1)
    if case == "negative-second-moment":  # its replay is NaN: the island's fault
        assert later.result in ("mismatch", "unverifiable"), later.detail
    else:
        assert later.result == "match", later.detail  # the residual the docs state


@pytest.mark.parametrize(
    "case", ["inf", "-inf", "nan", "snan", "nan-ffff", "float32", "float32-rounded"]
)
def test_an_invalid_bfloat16_carried_state_is_unverifiable_next_round(
    world: World, tmp_path: Path, case: str
) -> None:
    """NaN/Inf bit patterns, the unrounded float32 moments in the float32 width (an
    island that keeps them and names them), the rounded values widened back to float32:
    round 0 is a ``mismatch`` (``update``), round 1's start cannot be derived by anyone
    (the island itself cannot train it) and its audit is ``unverifiable``: the float32
    states are over the bfloat16 fetch limit (``too_large``), the others refused by the
    reader."""
    relay = _fresh_relay(world)
    honest = two_rounds(world, tmp_path, relay=relay)
    carried = honest.r0.index.carried
    assert carried is not None
    config = TrainConfig.from_manifest(world.manifest).state_config()
    if case.startswith("float32"):
        final = honest.r0.result.final
        kept = carried_of(final, honest.r0.start_params, world.manifest.compression)
        if case == "float32-rounded":
            state = decode_carried(relay.blobs[carried], config)
            kept = CarriedState(state.step, {n: t.float() for n, t in state.tensors.items()},
                                state.config_digest)  # fmt: skip
        name = relay.put(encode_carried(kept))
        assert len(relay.blobs[name]) > carried_size(config)
    else:
        pattern = {"inf": 0x7F80, "-inf": 0xFF80, "nan": 0x7FC0, "snan": 0x7F81,
                   "nan-ffff": 0xFFFF}[case]  # fmt: skip
        name = forged_bits(relay, world, carried, _first_to(pattern))
        assert len(relay.blobs[name]) == carried_size(config)
    lie = resealed(world, relay, ISLAND, honest.r0, name)
    two = TwoRounds(relay, honest.opens, lie, honest.r1, honest.start1)
    outcome, _ = _verdict(world, two, 0)
    assert (outcome.result, outcome.check) == ("mismatch", "update"), outcome.detail
    later, service = _verdict(world, two, 1)
    assert later.result == "unverifiable", later.detail
    assert [v["result"] for v in service.verdicts] == ["unverifiable"]


def test_a_float32_run_refuses_the_bfloat16_carried_state(made: World, tmp_path: Path) -> None:
    """The reverse width: a float32 run's island that names a bfloat16 carried state
    (the same round's honest slots, rounded) is caught in round 0 and unverifiable in
    round 1 (dtype code 2 where the run's layout says 1)."""
    from tests.attacks_found.carried_state_review import policy_world

    wide = policy_world(made)
    assert slot_dtype(wide.manifest.inner) == torch.float32
    relay = _fresh_relay(wide)
    honest = two_rounds(wide, tmp_path, relay=relay)
    final = honest.r0.result.final
    narrow = carried_of(final, honest.r0.start_params, wide.manifest.compression,
                        slots=torch.bfloat16)  # fmt: skip
    lie = resealed(wide, relay, ISLAND, honest.r0, relay.put(encode_carried(narrow)))
    two = TwoRounds(relay, honest.opens, lie, honest.r1, honest.start1)
    outcome, _ = _verdict(wide, two, 0)
    assert (outcome.result, outcome.check) == ("mismatch", "update"), outcome.detail
    later, _ = _verdict(wide, two, 1)
    assert later.result == "unverifiable" and "dtype code" in later.detail, later.detail


def _inner(doc: dict[str, Any], **inner: Any) -> dict[str, Any]:
    return {**doc, "inner": {**doc["inner"], **inner}}


def test_the_width_is_part_of_the_runs_identity(made: World) -> None:
    """A float32 manifest's canonical bytes and hash are those of the same manifest
    without the field, written or not; bfloat16 changes the hash, so no signed run can be
    read in two widths by an island and its auditor; any other width, and bfloat16 under
    ``reset``, are refused."""
    doc = made.manifest.model_dump(mode="json")
    assert "carried_dtype" not in doc["inner"]
    carry = _inner(doc, state_policy="carry")
    plain = RunManifest.model_validate(carry)
    explicit = RunManifest.model_validate(_inner(carry, carried_dtype="float32"))
    assert b"carried_dtype" not in plain.canonical()
    assert explicit.canonical() == plain.canonical() and explicit.digest() == plain.digest()
    narrow = RunManifest.model_validate(_inner(carry, carried_dtype="bfloat16"))
    assert narrow.digest() != plain.digest() and b'"carried_dtype":"bfloat16"' in narrow.canonical()
    assert RunManifest.model_validate_json(narrow.canonical()) == narrow
    assert slot_dtype(narrow.inner) == torch.bfloat16 and slot_dtype(plain.inner) == torch.float32
    for width in ("float16", "bf16", "BFLOAT16", "float64", "int8", "", None, 2):
        with pytest.raises(ValidationError):
            RunManifest.model_validate(_inner(carry, carried_dtype=width))
    with pytest.raises(ValidationError, match="needs state_policy carry"):
        RunManifest.model_validate(_inner(doc, carried_dtype="bfloat16"))
    reset = RunManifest.model_validate(_inner(doc, carried_dtype="float32"))
    assert reset.canonical() == made.manifest.canonical()
    assert len(ROSTER) > 1  # the scenery's roster: the verdicts above were one island's
