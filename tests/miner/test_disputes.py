"""Pruning what a dispute can need, once the window has closed and every game is decided."""

from __future__ import annotations

from pathlib import Path

from hypertrain.miner.disputes import prunable, prune_round


def test_prunable_only_after_the_windows_with_every_game_decided() -> None:
    assert not prunable("final", 50, 50, undecided=False, audits_closed=True)  # window open
    assert prunable("final", 50, 51, undecided=False, audits_closed=True)
    assert not prunable("final", 50, 51, undecided=True, audits_closed=True)  # a game is on
    assert not prunable("merge", 50, 99, undecided=False, audits_closed=True)
    assert not prunable("final", None, 99, undecided=False, audits_closed=True)
    # an assignment may still get a verdict (or one's own window is open): kept, and
    # kept by default unless the caller shows otherwise
    assert not prunable("final", 50, 51, undecided=False, audits_closed=False)
    assert not prunable("final", 50, 51, undecided=False)


def test_prune_keeps_the_last_checkpoint(tmp_path: Path) -> None:
    for k in range(11):
        (tmp_path / f"ckpt_{k}.bin").write_bytes(b"x")
    assert prune_round(tmp_path) == 10
    assert [p.name for p in tmp_path.glob("ckpt_*.bin")] == ["ckpt_10.bin"]
    assert prune_round(tmp_path) == 0
