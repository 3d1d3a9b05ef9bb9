"""Utilisation under overlapped rounds: steps trained ahead of a round's open count as
compute when the round adopted them, the waits around them have causes, and every
second still adds up."""

from __future__ import annotations

import pytest

from hypertrain.devnet.island_marks import compute_seconds, island_rounds
from hypertrain.devnet.utilisation import whole_run
from tests.devnet.test_utilisation_run import _doc, _invariant, _line


def _ahead(event: str, index: int, ts: float) -> str:
    return _line(event, index, ts)[:-1] + ', "ahead": true}'


OVERLAPPED = [
    _line("round_seen", 0, 1000.5), _line("start_model_fetch", 0, 1000.8),
    _line("round_start", 0, 1002.0), _line("trained", 0, 1009.0),
    _line("uploaded", 0, 1010.0), _line("committed", 0, 1010.3),
    # round 0's audits selected at 1011: round 1 trained ahead, before its open at 1018
    _ahead("round_seen", 1, 1011.5), _ahead("round_start", 1, 1012.0), _line("trained", 1, 1016.0),
    _line("round_seen", 1, 1018.4), _line("start_model_fetch", 1, 1018.6),
    _line("round_start", 1, 1019.0), _line("adopted", 1, 1019.1), _line("trained", 1, 1019.3),
    _line("uploaded", 1, 1020.0), _line("committed", 1, 1020.2),
]  # fmt: skip


def test_steps_trained_ahead_are_compute_and_the_wait_for_the_open_is_a_cause() -> None:
    assert compute_seconds(OVERLAPPED) == {0: 8.0, 1: 5.0}
    marks = island_rounds(OVERLAPPED)
    assert marks[1].ahead == (1012.0, 1016.0) and marks[1].started_ahead
    assert not marks[0].started_ahead
    u = whole_run(_doc(), {"island-o": OVERLAPPED})["islands"]["island-o"]
    assert u["compute_s"] == 13.0 and u["wall_s"] == 18.0 and u["complete"]
    assert u["adopted"] == 1 and u["rounds"] == 2 and u["compute_s_per_round"] == 6.5
    assert u["waiting_s"] == pytest.approx({
        "deadline": 0.3, "beacon": 0.7, "open": 2.0, "notice": 0.9, "prepare": 0.7,
        "download": 0.4,
    })  # fmt: skip
    assert "audit" not in u["waiting_s"] and "merge" not in u["waiting_s"]
    _invariant(u)


def test_ahead_work_the_round_did_not_adopt_is_lost_not_compute() -> None:
    discarded = [x.replace('"adopted"', '"ahead_discarded"') for x in OVERLAPPED]
    assert compute_seconds(discarded) == {0: 8.0, 1: 1.0}
    u = whole_run(_doc(), {"island-o": discarded})["islands"]["island-o"]
    assert u["compute_s"] == 9.0 and u["waiting_s"]["unfinished"] == pytest.approx(7.0)
    assert u["notes"] == ["round 1: trained ahead, not adopted, 7.0 s lost"]
    _invariant(u)


def test_a_round_trained_ahead_that_never_opened_is_not_wall_time() -> None:
    never = [*OVERLAPPED, _ahead("round_seen", 2, 1021.5), _ahead("round_start", 2, 1022.0)]
    u = whole_run(_doc(), {"island-o": never}, run_end=1090.0)["islands"]["island-o"]
    assert u["wall_s"] == 18.0 and u["compute_s"] == 13.0 and u["complete"]
    assert island_rounds(never)[2].started_ahead
    _invariant(u)
