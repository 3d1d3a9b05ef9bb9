"""The run report, its Markdown twin and the plain per-round line, from a dashboard document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypertrain.devnet.config import DevnetConfig
from hypertrain.devnet.keys import Secrets, generate
from hypertrain.devnet.report import build_report, write_report
from hypertrain.devnet.view import round_line, summary_rows, traffic_rows
from hypertrain.protocol.traffic import ratio_words


def _round(index: int, loss: float | None, phase: str = "final") -> dict[str, Any]:
    """A dashboard round row: round 0 in probation (joins, audits), later ones steady."""
    parts = {
        "commits": 10,
        "updates": 100,
        "broadcasts": 0 if index == 0 else 90,
        "checkpoints": 8000 if index == 0 else 0,
        "joins": 400 if index == 0 else 0,
    }
    moved = sum(parts.values())
    return {
        "round": index, "phase": phase, "eval_loss": loss, "train_loss": 6.0, "tokens": 1000,
        "bytes_sent": 100, "traffic": parts, "honest_bytes": moved,
        "data_parallel_bytes": 4000, "ratio_words": ratio_words(4000, moved),
        "probation": index == 0, "audits": 4, "compute_s": 5, "sync_s": 20,
        "verdicts": {"match": 3, "mismatch": 1},
    }  # fmt: skip


def _doc(sec: Secrets) -> dict[str, Any]:
    honeypot = sec.islands[-1].ss58
    islands = [
        {"hotkey": m.ss58, "status": "proven_fault" if m.ss58 == honeypot else "probation",
         "tokens": 1000, "escrow": 0 if m.ss58 == honeypot else 500, "vested": 0, "paid": 7,
         "burned": 0}
        for m in sec.islands
    ]  # fmt: skip
    return {
        "run_id": "devnet",
        "model": {"preset": "tiny"},
        "rounds": [_round(0, 6.5), _round(1, 6.1), _round(2, None, phase="audit")],
        "islands": islands,
        "audits": [{"hotkey": honeypot, "accused": True, "round": 0}],
    }


def test_report_uses_the_services_losses_and_finds_the_honeypot(tmp_path: Path) -> None:
    sec = generate(tmp_path / "s", islands=3)
    weights = {"weights": {sec.islands[0].ss58: 0.5}}
    report = build_report(
        _doc(sec), sec, strategy="skip-steps", weights=weights, ledger_verified=True,
        model_export="m", children_left=0, layouts=DevnetConfig().island_layouts(),
    )  # fmt: skip
    assert [(r["round"], r["heldout_loss"]) for r in report["rounds"]] == [(0, 6.5), (1, 6.1)]
    assert report["honeypot"] == {
        "name": "island-4", "hotkey": sec.islands[-1].ss58, "strategy": "skip-steps",
        "caught": True, "honest_rounds": 0, "first_fault_round": None,
        "escrow_before_fault": 0, "burned": 0, "weight_after": 0,
    }  # fmt: skip
    assert [m["honeypot"] for m in report["miners"]] == [False, False, False, True]
    t = report["traffic"]  # the finished rounds 0 (probation) and 1 (steady)
    assert (t["steady"]["rounds"], t["probation"]["rounds"], t["all"]["rounds"]) == (1, 1, 2)
    assert t["steady"]["words"] == "20× less than data-parallel"  # 4000 / 200
    assert t["probation"]["words"] == "2.1× more than data-parallel"  # 8510 / 4000
    assert rows_of(report)["traffic vs data-parallel, steady state rounds"].startswith(
        "20× less than data-parallel (200 B against 4,000 B, 1 rounds)"
    )
    assert report["island_layouts"]["applied"] is False
    assert report["island_layouts"]["planned"]["island-3"]["micro_batches"] == 3
    assert report["miners"][0]["weight"] == 0.5 and report["miners"][0]["paid"] == 7
    rows = dict(summary_rows(report))
    assert rows[f"miner island-1 {sec.islands[0].ss58[:6]}…{sec.islands[0].ss58[-4:]}"].endswith(
        "paid 7  burned 0  weight 1.000"
    )
    assert rows["final held-out loss"].startswith(
        "6.1000 (after the first round: 6.5000, drop 0.4000"
    )
    md = write_report(report, tmp_path / "out" / "report.json")
    assert json.loads((tmp_path / "out" / "report.json").read_text())["rounds"][1]["round"] == 1
    text = md.read_text()
    assert "| 1 | 6.1000 | 1,000 | 200 | 4,000 | 20× less than data-parallel | 4 | 1 |" in text
    assert (
        "| 0 | 6.5000 | 1,000 | 8,510 | 4,000 | 2.1× more than data-parallel (probation) |" in text
    )


def rows_of(report: dict[str, Any]) -> dict[str, str]:
    return dict(summary_rows(report))


def test_round_line_reads_as_a_sentence() -> None:
    line = round_line(_round(1, 6.1234), 4)
    assert line.startswith("round 1 done (2/4): held-out loss 6.1234, 1,000 tokens")
    assert line.endswith("audits 4: 3 match, 1 fault (mismatch or unverifiable)")


def test_a_round_without_a_fault_still_prints_its_line() -> None:
    """A round whose audits all matched once printed an empty line: the fault clause's
    ``* bool(...)`` repeated the whole concatenated sentence, not just the clause."""
    clean = {**_round(0, 6.5), "verdicts": {"match": 4, "mismatch": 0}}
    line = round_line(clean, 4)
    assert line.startswith("round 0 done (1/4): held-out loss 6.5000")
    assert line.endswith("audits 4: 4 match, 0 faults")


def test_the_summary_shows_what_the_honeypots_fault_cost(tmp_path: Path) -> None:
    """Honest in rounds 0 and 1 (probation, then vesting), caught cheating in round 2: the
    real ledger's journal gives the escrow it built and the burn; its weight is 0."""
    import io

    from hypertrain.devnet.report import fault_cost, read_journal
    from hypertrain.ledger import Ledger

    sec = generate(tmp_path / "s", islands=1)
    honest, pot = (m.ss58 for m in sec.islands)
    with Ledger(tmp_path / "ledger.sqlite3") as ledger:
        ledger.create_run("devnet", pool_per_round=1000, vesting_rounds=2)
        ledger.settle_round("devnet", 0, {honest: 300, pot: 100}, 1, held={honest: 1, pot: 1})
        ledger.settle_round("devnet", 1, {honest: 300, pot: 100}, 1)
        ledger.settle_round("devnet", 2, {honest: 300}, 1)  # the honeypot's commit faulted
        burned = ledger.record_fault("devnet", 2, pot, "mismatch", 1)
        ledger.settle_round("devnet", 3, {honest: 300}, 1)
        assert ledger.record_fault("devnet", 3, pot, "mismatch", 1) == 0  # nothing left
        weights = ledger.get_weights(1, {honest, pot}).weights
        out = io.BytesIO()
        ledger.write_journal(out, "devnet")
    journal = read_journal(out.getvalue().decode())
    cost = fault_cost(journal, pot, weights)
    assert cost == {
        "first_fault_round": 2, "escrow_before_fault": 500, "burned": burned,
        "weight_after": 0,
    }  # fmt: skip
    assert burned == 500  # all of it: nothing was paid out yet
    assert fault_cost(journal, honest, weights)["first_fault_round"] is None

    report = build_report(
        _doc(sec), sec, strategy="bad-update", weights={"weights": weights},
        ledger_verified=True, model_export="m", children_left=0, honest_rounds=2,
        journal=journal,
    )  # fmt: skip
    assert report["honeypot"]["burned"] == 500 and report["honeypot"]["honest_rounds"] == 2
    rows = dict(summary_rows(report))
    assert rows["honeypot"].endswith("bad-update (honest for 2 rounds): caught=True")
    assert rows["honeypot fault cost"] == (
        "escrow 500 before the fault in round 2, burned 500, weight afterwards 0"
    )
    md = write_report(report, tmp_path / "r" / "report.json").read_text()
    assert "| honeypot fault cost | escrow 500 before the fault in round 2, burned 500," in md


def test_the_summary_says_when_no_fault_was_recorded(tmp_path: Path) -> None:
    sec = generate(tmp_path / "s", islands=1)
    report = build_report(
        _doc(sec), sec, strategy="skip-steps", weights={}, ledger_verified=True,
        model_export=None, children_left=0,
    )  # fmt: skip
    rows = dict(summary_rows(report))
    assert rows["honeypot fault cost"] == "no fault recorded in the ledger"
    assert report["rollbacks"] == [] and rows["rollbacks"].startswith("none")


def test_the_rollback_line_names_the_island_its_depth_and_where_islands_moved() -> None:
    from hypertrain.devnet.rollbacks import resumed_round, rollback_line

    head = "ab" * 32
    starts = {2: "cd" * 32, 3: "ef" * 32, 4: head, 5: "12" * 32}
    assert resumed_round(starts, after=3, model=head) == 4  # the first later round on it
    assert resumed_round(starts, after=4, model=head) is None  # none opened after 4 on it
    assert resumed_round(starts, after=1, model=None) is None
    row = {"round": 1, "hotkey": "5Hg" + "x" * 45, "island": "island-4", "corrected": True,
           "depth": 2, "corrected_model_sha256": "9f" * 32, "resumed_round": 4}  # fmt: skip
    assert rollback_line([row]) == (
        "round 1 island-4 5Hgxxxxx… (depth 2): corrected model 9f9f9f9f9f9f…,"
        " islands on it from round 4"
    )


def test_the_all_in_ratio_leads_and_counts_the_warm_start_on_both_sides() -> None:
    from hypertrain.devnet.report import all_in_of, traffic_summary
    from hypertrain.devnet.view import all_in_rows

    rounds = [{"round": 0, "traffic": {"updates": 60, "broadcasts": 40},
               "data_parallel_bytes": 2_000, "probation": True}]  # fmt: skip
    traffic = traffic_summary(rounds, {"data_parallel_bytes": 900})
    card = traffic["all_in"]
    assert (card["honest_bytes"], card["data_parallel_bytes"]) == (1_000, 2_900)
    assert card["warm_start_bytes"] == 900 and card["words"] == "2.9× less than data-parallel"
    [(label, words)] = all_in_rows(traffic)
    assert label.endswith("all-in")
    assert words.startswith("2.9× less than data-parallel (1,000 B against 2,900 B")
    assert words.endswith("warm start's steps counted as data-parallel on both sides)")
    plain = all_in_rows(traffic_summary(rounds))[0][1]
    assert plain.startswith("20× less") and plain.endswith("every round, no warm start)")
    assert all_in_rows(None) == [] and all_in_rows(traffic_summary([])) == []
    # a report written before reports carried the card gets the same one from its rows
    older = {k: v for k, v in traffic.items() if k != "all_in"}
    assert all_in_of(older, {"data_parallel_bytes": 900}) == card


def test_the_summary_gives_the_steady_state_expected_at_the_audit_rate() -> None:
    expected = {"audit_rate": 0.1, "audits_per_round": 0.4, "uploads_per_audit": 1.0,
                "bytes_per_round": 31_038_898, "data_parallel_bytes_per_round": 1_251_256_320,
                "ratio": 40.3, "words": "40× less than data-parallel"}  # fmt: skip
    total = {"words": "12× less than data-parallel", "honest_bytes": 1, "rounds": 1,
             "data_parallel_bytes": 12}  # fmt: skip
    traffic = {"all": total, "steady": total, "probation": total, "expected": expected}
    rows = dict(traffic_rows(traffic))
    key = "traffic vs data-parallel, steady state expected at audit rate 0.1"
    assert rows[key].startswith("40× less than data-parallel (0.40 audits a round")
    bare = traffic_rows({**traffic, "expected": None})  # no steady round yet: no row
    assert not any(k.startswith("traffic vs data-parallel, steady state expected") for k, _ in bare)
