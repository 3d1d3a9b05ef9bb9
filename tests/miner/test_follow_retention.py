"""A following island prunes closed rounds, and never what an audit or dispute can need.

The rule is watch's (``miner.disputes.prunable`` and ``audits_closed``); these tests hold
the follow loop's use of it: a closed round keeps only its final checkpoint, the round
before it goes once both are closed, the newest rounds and a round whose verdict's window
is still open are kept whole.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypertrain.miner.config import MinerConfig
from hypertrain.miner.island import checkpoint_path
from hypertrain.miner.report import Reporter
from hypertrain.miner.retention import Retention

ME, OTHER = "5Me", "5Other"
WINDOW = 3


class _Service:
    """The reads ``Retention.prune`` makes of the service, over fixed round records."""

    def __init__(self, now: int, audited: dict[int, int]) -> None:
        self.now, self.audited = now, audited  # round -> the beacon round its verdict came

    def beacon_round(self) -> int:
        return self.now

    def disputes(self, run_id: str) -> list[Any]:
        return []

    def reassigned(self, run_id: str) -> list[Any]:
        return []

    def round_detail(self, run_id: str, index: int) -> Any:
        mine = index in self.audited
        assignments = [SimpleNamespace(body={"hotkey": ME if mine else OTHER})]
        verdicts = [
            SimpleNamespace(verdict_id=f"v{index}", envelope=SimpleNamespace(body={"hotkey": ME}))
        ]
        return SimpleNamespace(
            round=index,
            assignments=assignments,
            verdicts=verdicts if mine else [],
            dispute_deadline_round=10 * index + 5,
        )


def _context(tmp_path: Path, service: _Service) -> Any:
    config = MinerConfig(run_id="r", state_dir=str(tmp_path / "state"))
    manifest = SimpleNamespace(run_id="r", round=SimpleNamespace(dispute_window_rounds=WINDOW))
    return SimpleNamespace(config=config, service=service, manifest=manifest)


def _rounds(ctx: Any, count: int) -> list[Any]:
    out = []
    for index in range(count):
        workdir = ctx.config.round_dir(index)
        workdir.mkdir(parents=True, exist_ok=True)
        for k in range(4):
            checkpoint_path(workdir, k).write_bytes(b"x")
        out.append(
            SimpleNamespace(round=index, phase="final", dispute_deadline_round=10 * index + 5)
        )
    return out


def _left(ctx: Any, index: int) -> list[str]:
    workdir = ctx.config.round_dir(index)
    return sorted(p.name for p in workdir.glob("ckpt_*.bin")) if workdir.exists() else []


def test_closed_rounds_shrink_then_go_and_the_newest_stay_whole(tmp_path: Path) -> None:
    service = _Service(now=1000, audited={})
    ctx = _context(tmp_path, service)
    rounds = _rounds(ctx, 6)
    kept = Retention()
    for _ in range(3):  # a few polls (each reads a bounded number of rounds)
        kept.prune(ctx, SimpleNamespace(ss58_address=ME), rounds, Reporter("miner"))
    assert [_left(ctx, i) for i in range(3)] == [[], [], []]  # closed, and so is the next
    assert _left(ctx, 3) == ["ckpt_3.bin"]  # closed: only its final checkpoint (carry)
    assert _left(ctx, 4) == _left(ctx, 5) == [f"ckpt_{k}.bin" for k in range(4)]  # newest


def test_a_round_whose_verdict_window_is_open_is_kept_whole(tmp_path: Path) -> None:
    service = _Service(now=1000, audited={1: 1000})
    ctx = _context(tmp_path, service)
    rounds = _rounds(ctx, 6)
    kept, me = Retention(), SimpleNamespace(ss58_address=ME)
    kept.prune(ctx, me, rounds, Reporter("miner"))
    # round 1's verdict was first seen now: its own dispute window runs WINDOW more rounds
    assert _left(ctx, 1) == [f"ckpt_{k}.bin" for k in range(4)]
    assert _left(ctx, 0) == ["ckpt_3.bin"]  # closed, but round 1 after it is not
    service.now += WINDOW + 1
    kept.prune(ctx, me, rounds, Reporter("miner"))
    assert _left(ctx, 0) == [] and _left(ctx, 1) == []
