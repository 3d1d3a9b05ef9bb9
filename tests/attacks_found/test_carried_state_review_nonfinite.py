"""A carried state of finite but huge moments: the next round's replay goes non-finite.

``decode_carried`` refuses NaN/Inf, not size: a first moment of ``1e38`` with a zero
second moment is a valid ``HTCARRY1`` stream. An island whose round-0 index names such a
state (round 0 unaudited, or audited without its final segment: the documented residual)
starts round 1 from it; Adam's first step divides ``1e38`` by ``eps`` and the parameters
become Inf, then NaN. The island trains exactly that (nothing in training refuses
non-finite values), so its leaves *are* the replay's. The auditor's replay reproduces
them; the final segment's check then re-encodes the update from a NaN state, and the
codec raises ``CodecError``. ``_check_update`` runs outside ``_island_bytes`` (the guard
that turns any failure on island-authored bytes into ``unverifiable``), so the exception
leaves ``audit_island`` and ``Auditor.judge``: no verdict is posted, ``audit_round`` logs
an ``error`` and retries the replay on every pass, and every re-audit of the missed
assignment (``rejudge``) does the same for ever. The island is never faulted.

The safe behaviour asserted: every audit of the island's bytes ends in a verdict
(``unverifiable`` or ``mismatch``), never an exception.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hypertrain.auditor.disputes import rejudge
from hypertrain.auditor.replay import audit_island
from hypertrain.auditor.runner import judge_and_post
from hypertrain.evidence.verify import verify_round_open
from tests.attacks_found.carried_state_review import (
    Service,
    assignment,
    auditor,
    forged_carried,
    policy_world,
    resealed,
    two_rounds,
)
from tests.auditor.islands import MemoryRelay, Published
from tests.auditor.world import ISLANDS, World, make_world

ISLAND = ISLANDS[0]


@pytest.fixture(scope="module")
def made(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> World:
    return make_world(assets_dir, tmp_path_factory.mktemp("carried-nonfinite"))


def _huge_moments(name: str, t: torch.Tensor) -> torch.Tensor:
    if name.startswith("optim.exp_avg."):
        return torch.full_like(t, 1e38)  # finite: decode_carried takes it
    if name.startswith("optim.exp_avg_sq."):
        return torch.zeros_like(t)
    return t


def _r0_update(relay: MemoryRelay, r0: Published) -> bytes:
    """Any well-formed update: the island commits its round-0 one again."""
    return relay.blobs[r0.commit.update_sha256]


def _names_huge(world: World) -> Any:
    def round0(relay: MemoryRelay, pub: Published) -> Published:
        assert pub.index.carried is not None
        fake = forged_carried(relay, world, pub.index.carried, _huge_moments)
        return resealed(world, relay, ISLAND, pub, fake)

    return round0


def test_a_carried_state_that_drives_the_replay_non_finite_still_gets_a_verdict(
    made: World, tmp_path: Path
) -> None:
    world = policy_world(made, one_segment=True)
    two = two_rounds(world, tmp_path, round0=_names_huge(world), round1_update=_r0_update)
    final = two.r1.result.final
    assert not all(bool(torch.isfinite(t).all()) for t in final.params().values()), (
        "precondition: the island's round 1 went non-finite"
    )
    details = two.details()
    service = Service(details)
    judge = auditor(world, two.relay, service)
    try:
        outcome = judge.judge(details[1], assignment(1, ISLAND, world))
    except Exception as exc:
        pytest.fail(
            "the island's round is never judged: the final segment's update check raised"
            f" {type(exc).__name__}: {exc} outside the unverifiable guard"
        )
    assert outcome.result in ("unverifiable", "mismatch"), outcome.detail


def test_the_replay_itself_is_judged_directly(made: World, tmp_path: Path) -> None:
    """The same through ``audit_island`` (the replay's whole check) and the re-audit path
    (``rejudge`` swallows the exception and posts nothing, every pass)."""
    world = policy_world(made, one_segment=True)
    two = two_rounds(world, tmp_path, round0=_names_huge(world), round1_update=_r0_update)
    details = two.details()
    judge = auditor(world, two.relay, Service(details))
    island = judge.island_round(details[1], assignment(1, ISLAND, world))
    try:
        outcome = audit_island(island, [0], two.relay.blobs.__getitem__)
    except Exception as exc:
        pytest.fail(f"audit_island raised {type(exc).__name__}: {exc}")
    assert outcome.result in ("unverifiable", "mismatch"), outcome.detail


class _Reassigning(Service):
    def __init__(self, details: dict[int, Any], item: Any) -> None:
        super().__init__(details)
        self.item = item

    def reassigned(self, run_id: str) -> list[Any]:
        return [self.item]


def test_a_reaudit_of_the_non_finite_round_posts_a_verdict(made: World, tmp_path: Path) -> None:
    from types import SimpleNamespace

    from hypertrain.protocol.envelope import seal
    from tests.auditor.world import COORD, RUN_ID

    world = policy_world(made, one_segment=True)
    two = two_rounds(world, tmp_path, round0=_names_huge(world), round1_update=_r0_update)
    details = two.details()
    raw = seal(
        COORD, domain="audit-assignment", run_id=RUN_ID,
        body=assignment(1, ISLAND, world).model_dump(mode="json"), expiry_round=10**9,
    ).model_dump(mode="json")  # fmt: skip
    detail1 = SimpleNamespace(open=details[1].open, commits=details[1].commits, verdicts=[])
    item = SimpleNamespace(auditor=ISLANDS[1].ss58_address, round=1,
                           hotkey=ISLAND.ss58_address, assignment=raw)  # fmt: skip
    service = _Reassigning({0: details[0], 1: detail1}, item)
    events: list[tuple[str, dict[str, Any]]] = []
    rejudge(auditor(world, two.relay, service), lambda e, **kw: events.append((e, kw)))
    assert [v["result"] for v in service.verdicts] in (["unverifiable"], ["mismatch"]), events


def test_an_honest_round_from_the_honest_carried_state_matches(made: World, tmp_path: Path) -> None:
    """Control (passes): the same two rounds with the honest carried state match, and
    the forged state's round 0, had its final segment been audited, is a mismatch."""
    world = policy_world(made, one_segment=True)
    two = two_rounds(world, tmp_path)
    details = two.details()
    service = Service(details)
    judge = auditor(world, two.relay, service)
    assert judge.judge(details[1], assignment(1, ISLAND, world)).result == "match"
    forged = two_rounds(
        world, tmp_path / "forged", round0=_names_huge(world), round1_update=_r0_update
    )
    fdetails = forged.details()
    verify_round_open(fdetails[0].open.model_dump(), world.manifest, 0)
    outcome = judge_and_post(
        auditor(world, forged.relay, Service(fdetails)), fdetails[0],
        assignment(0, ISLAND, world), lambda *_, **__: None,
    )  # fmt: skip
    assert (outcome.result, outcome.check) == ("mismatch", "update"), outcome.detail
