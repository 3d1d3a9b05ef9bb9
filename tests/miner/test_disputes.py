"""Pruning what a dispute can need, once the window has closed and every game is decided."""

from __future__ import annotations

from pathlib import Path

from hypertrain.miner.disputes import prunable, prune_round


def test_prunable_only_after_the_window_with_every_game_decided() -> None:
    assert not prunable("final", 50, 50, undecided=False)  # the window is still open
    assert prunable("final", 50, 51, undecided=False)
    assert not prunable("final", 50, 51, undecided=True)  # a game is still being played
    assert not prunable("merge", 50, 99, undecided=False)
    assert not prunable("final", None, 99, undecided=False)


def test_prune_keeps_the_last_checkpoint(tmp_path: Path) -> None:
    for k in range(11):
        (tmp_path / f"ckpt_{k}.bin").write_bytes(b"x")
    assert prune_round(tmp_path) == 10
    assert [p.name for p in tmp_path.glob("ckpt_*.bin")] == ["ckpt_10.bin"]
    assert prune_round(tmp_path) == 0
