"""verify and export: hand-edited entries, broken links, rule violations, the CLI."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hypertrain.cli import main
from hypertrain.ledger import Ledger, verify_export
from hypertrain.ledger.journal import GENESIS, Entry, make_entry
from hypertrain.ledger.storage import LEDGER_FILENAME


def _populate(led: Ledger, hotkeys: list[str]) -> None:
    led.create_run("r1", 1000, 3)
    led.create_run("r2", 50, 1)
    for rnd in range(4):
        led.settle_round("r1", rnd, {hotkeys[0]: 2, hotkeys[1]: 1}, epoch=rnd)
        led.settle_round("r2", rnd, {hotkeys[2]: 1}, epoch=rnd)
    led.get_weights(3, hotkeys)
    led.record_fault("r1", 2, hotkeys[1], "verdict 9: end hash mismatch", epoch=4)


@pytest.fixture
def state_dir(tmp_path: Path, hotkeys: list[str]) -> Path:
    with Ledger.in_state_dir(tmp_path) as led:
        _populate(led, hotkeys)
        assert led.verify().ok
    return tmp_path


def _sql(state_dir: Path, statement: str, *params: object) -> None:
    conn = sqlite3.connect(state_dir / LEDGER_FILENAME)
    with conn:
        conn.execute(statement, params)
    conn.close()


def _verify(state_dir: Path) -> tuple[bool, str | None, list[str]]:
    with Ledger.in_state_dir(state_dir) as led:
        report = led.verify()
    return report.ok, report.first_bad, report.problems


def test_edited_entry_body_is_detected(state_dir: Path) -> None:
    _sql(state_dir, "UPDATE journal SET body = replace(body, '\"amount\":667', '\"amount\":767')"
         " WHERE run_id = 'r1' AND seq = 3")  # fmt: skip
    ok, first_bad, _ = _verify(state_dir)
    assert not ok and first_bad is not None
    assert first_bad.startswith("run r1 entry 3:") and "edited" in first_bad


def test_edited_amount_column_is_detected(state_dir: Path) -> None:
    _sql(state_dir, "UPDATE journal SET amount = amount + 1 WHERE run_id = 'r2' AND seq = 4")
    ok, first_bad, _ = _verify(state_dir)
    assert not ok and first_bad is not None and first_bad.startswith("run r2 entry 4:")


def test_rehashed_edit_breaks_the_next_link(state_dir: Path) -> None:
    conn = sqlite3.connect(state_dir / LEDGER_FILENAME)
    body = conn.execute("SELECT body FROM journal WHERE run_id='r1' AND seq=3").fetchone()[0]
    conn.close()
    forged = make_entry(**{**_fields(body), "amount": 999})
    _sql(state_dir, "UPDATE journal SET body = ?, hash = ?, amount = 999"
         " WHERE run_id = 'r1' AND seq = 3", forged.body, forged.hash)  # fmt: skip
    ok, first_bad, _ = _verify(state_dir)
    assert not ok and first_bad is not None
    assert first_bad.startswith("run r1 entry 4:") and "link" in first_bad


def _fields(body: bytes) -> dict[str, Any]:
    from hypertrain.ledger.journal import decode_entry

    e = decode_entry(body)
    return {"run": e.run, "seq": e.seq, "prev": e.prev, "kind": e.kind, "point": e.point,
            "hotkey": e.hotkey, "amount": e.amount, "epoch": e.epoch, "detail": e.detail,
            "reason": e.reason}  # fmt: skip


def test_deleted_entry_is_detected(state_dir: Path) -> None:
    _sql(state_dir, "DELETE FROM journal WHERE run_id = 'r2' AND seq = 5")
    ok, first_bad, _ = _verify(state_dir)
    assert not ok and first_bad is not None and first_bad.startswith("run r2 entry 5:")


def test_edited_balance_table_is_detected(state_dir: Path, hotkeys: list[str]) -> None:
    _sql(state_dir, "UPDATE balances SET paid = paid + 5 WHERE hotkey = ?", hotkeys[0])
    ok, first_bad, problems = _verify(state_dir)
    assert not ok and first_bad is None
    assert any("balance of" in p for p in problems)


def test_edited_weights_answer_is_detected(state_dir: Path) -> None:
    _sql(state_dir, "UPDATE weights SET answer = replace(answer, '\"epoch\":3', '\"epoch\":3 ')")
    ok, _, problems = _verify(state_dir)
    assert not ok and any("weights answer for epoch 3" in p for p in problems)


def test_export_round_trips_and_detects_edits(state_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "journal.jsonl"
    with Ledger.in_state_dir(state_dir) as led:
        count = led.export_journal(out)
        assert count == led.summary("r1").journal_entries + led.summary("r2").journal_entries
        assert led.export_journal(tmp_path / "r2.jsonl", "r2") == led.summary("r2").journal_entries
    assert verify_export(out).ok
    lines = out.read_bytes().splitlines()
    lines[5] = lines[5].replace(b'"amount":', b'"amount":1')
    out.write_bytes(b"\n".join(lines) + b"\n")
    report = verify_export(out)
    assert not report.ok and report.first_bad is not None
    (tmp_path / "junk.jsonl").write_bytes(b"{not json\n")
    assert (
        verify_export(tmp_path / "junk.jsonl").first_bad
        == "line 1: " + (verify_export(tmp_path / "junk.jsonl").problems[0].split(": ", 1)[1])
    )


def _chain(*specs: dict[str, object]) -> list[Entry]:
    entries: list[Entry] = []
    prev = GENESIS
    for seq, spec in enumerate(specs, start=1):
        entry = make_entry(run="x", seq=seq, prev=prev, **spec)  # type: ignore[arg-type]
        entries.append(entry)
        prev = entry.hash
    return entries


def _write(path: Path, entries: list[Entry]) -> Path:
    path.write_bytes(b"".join(e.body + b"\n" for e in entries))
    return path


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"kind": "pay", "point": 1, "hotkey": "H", "amount": 5}, "negative"),
        ({"kind": "escrow", "point": 0, "hotkey": "H", "amount": 1}, "applied twice"),
        ({"kind": "escrow", "point": 0, "hotkey": "G", "amount": 1}, "more than its pool"),
        ({"kind": "mint", "point": 1, "amount": 11}, "differs from the pool"),
    ],
)
def test_rule_violations_in_a_well_chained_journal(
    tmp_path: Path, bad: dict[str, object], message: str
) -> None:
    good = _chain(
        {"kind": "open_run", "point": 0, "detail": {"pool_per_round": 10, "vesting_rounds": 1}},
        {"kind": "mint", "point": 0, "amount": 10},
        {"kind": "escrow", "point": 0, "hotkey": "H", "amount": 10},
    )
    assert verify_export(_write(tmp_path / "good.jsonl", good)).ok
    entries = _chain(
        {"kind": "open_run", "point": 0, "detail": {"pool_per_round": 10, "vesting_rounds": 1}},
        {"kind": "mint", "point": 0, "amount": 10},
        {"kind": "escrow", "point": 0, "hotkey": "H", "amount": 10},
        bad,
    )
    report = verify_export(_write(tmp_path / "bad.jsonl", entries))
    assert not report.ok and report.first_bad is not None
    assert report.first_bad.startswith("run x entry 4:") and message in report.first_bad


def test_cli_verify_export_summary(
    state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "verify", "--state-dir", str(state_dir)]) == 0
    assert capsys.readouterr().out.startswith("OK: 2 run(s)")
    assert main(["ledger", "verify", "--state-dir", str(state_dir), "--run", "r2"]) == 0
    out = tmp_path / "j.jsonl"
    assert main(["ledger", "export", "--state-dir", str(state_dir), "--out", str(out)]) == 0
    assert main(["ledger", "verify", "--journal", str(out)]) == 0
    assert main(["ledger", "summary", "--state-dir", str(state_dir), "--run", "r1"]) == 0
    assert '"minted": 4000' in capsys.readouterr().out
    _sql(state_dir, "UPDATE journal SET body = replace(body, '\"epoch\":1', '\"epoch\":2')"
         " WHERE run_id = 'r1' AND seq = 5")  # fmt: skip
    assert main(["ledger", "verify", "--state-dir", str(state_dir)]) == 1
    assert "first bad entry: run r1 entry 5" in capsys.readouterr().out
    assert main(["ledger", "verify", "--state-dir", str(tmp_path / "none")]) == 1
    assert "no ledger" in capsys.readouterr().err
    assert main(["ledger", "summary", "--state-dir", str(state_dir), "--run", "zz"]) == 1
    assert "unknown run" in capsys.readouterr().err


def test_cli_export_to_stdout(state_dir: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert (
        main(["ledger", "export", "--state-dir", str(state_dir), "--out", "-", "--run", "r2"]) == 0
    )
    lines = capsysbinary.readouterr().out.splitlines()
    with Ledger.in_state_dir(state_dir) as led:
        assert len(lines) == led.summary("r2").journal_entries
    assert lines[0].startswith(b'{"amount":0,"detail":{"pool_per_round":50')
