"""The live terminal view (rich) and the final summary table.

Both are pure renderings of the dashboard JSON document (held-out losses included,
as posted by the aggregator), so what the terminal shows is what the web page shows.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from hypertrain.devnet.rollbacks import rollback_line


def _short(hotkey: str) -> str:
    return f"{hotkey[:6]}…{hotkey[-4:]}"


def _fmt(x: float | None, digits: int = 4) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def live_view(doc: dict[str, Any] | None, total_rounds: int, url: str) -> Group:
    """One frame: round and phase, per-island progress, loss, throughput, bytes, audits."""
    if doc is None:
        return Group(Text(f"starting the network… dashboard: {url}"))
    g = doc["glance"]
    head = Text.assemble(
        ("Hypertrain devnet  ", "bold"),
        f"round {'—' if g['round'] is None else g['round']}"
        f" ({g['rounds_done']}/{total_rounds} done)  ",
        f"phase {g['phase'] or '—'}  ",
        f"held-out loss {_fmt(g['heldout_loss'])}  ",
        f"tokens {g['tokens']:,}  sent {g['bytes_sent']:,} B  ",
        f"audits {g['audits']}  accused {g['accused']}",
    )
    table = Table(expand=True)
    for col in ("island", "status", "inner steps", "tok/s", "tokens", "share"):
        table.add_column(col)
    for isl in doc["islands"]:
        bar = ProgressBar(total=max(1, isl["steps_total"]), completed=isl["steps_done"], width=20)
        table.add_row(
            f"{isl.get('name', '')} {_short(isl['hotkey'])}",
            isl["status"],
            Group(bar, Text(f"{isl['steps_done']}/{isl['steps_total']}")),
            _fmt(isl["tokens_per_s"], 0),
            f"{isl['tokens']:,}",
            f"{100 * isl['share']:.1f} %",
        )
    verdicts = [
        f"r{a['round']} {_short(a['hotkey'])}: "
        + (", ".join(v["result"] for v in a["verdicts"]) or "pending")
        for a in doc["audits"][:6]
    ]
    foot = Text(f"dashboard: {url}  (Ctrl-C stops everything)", style="dim")
    return Group(head, table, Text("audits: " + ("; ".join(verdicts) or "none yet")), foot)


def round_line(r: dict[str, Any], total_rounds: int) -> str:
    """One plain line per finished round, for runs without a terminal."""
    v = r["verdicts"]
    faults = f"{v['mismatch']} fault{'' if v['mismatch'] == 1 else 's'}"
    if v["mismatch"]:
        faults += " (mismatch or unverifiable)"
    return (
        f"round {r['round']} done ({r['round'] + 1}/{total_rounds}): held-out loss"
        f" {_fmt(r['eval_loss'])}, "
        f"{r['tokens']:,} tokens, {r['honest_bytes']:,} B moved "
        f"({r['ratio_words']}), audits {r['audits']}: {v['match']} match, {faults}"
    )


def summary_table(report: dict[str, Any]) -> Table:
    """The end-of-run summary: loss, tokens, bandwidth, audits, ledger, weights."""
    table = Table(title="Devnet summary", show_header=False)
    table.add_column("what")
    table.add_column("value")
    for key, value in summary_rows(report):
        table.add_row(key, value)
    return table


def fault_line(hp: dict[str, Any]) -> str:
    """The honeypot's burn: escrow built while honest, what its fault burned, its weight."""
    first = hp.get("first_fault_round")
    if first is None:
        return "no fault recorded in the ledger"
    return (
        f"escrow {hp.get('escrow_before_fault', 0):,} before the fault in round {first},"
        f" burned {hp.get('burned', 0):,}, weight afterwards {hp.get('weight_after', 0)}"
    )


def traffic_rows(traffic: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Steady-state, probation and all rounds' traffic, in the dashboard's words."""
    if not traffic:
        return [("traffic vs data-parallel", "—")]
    out = []
    expected = traffic.get("expected")
    if expected:  # the steady state at the audit rate, not this run's draw of audits
        out.append(
            (
                f"traffic vs data-parallel, steady state expected at audit rate"
                f" {expected['audit_rate']:g}",
                f"{expected['words']} ({expected['audits_per_round']:.2f} audits a round,"
                f" {expected['uploads_per_audit']:.2f} training states uploaded per audit)",
            )
        )
    for key, label in (("steady", "steady state"), ("probation", "probation"), ("all", "all")):
        t = traffic[key]
        out.append(
            (
                f"traffic vs data-parallel, {label} rounds",
                f"{t['words']} ({t['honest_bytes']:,} B against {t['data_parallel_bytes']:,} B,"
                f" {t['rounds']} rounds)",
            )
        )
    return out


def all_in_rows(traffic: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The headline: every round and the warm start, whose data-parallel steps cost the
    same ring bytes on both sides (so it caps the ratio near 1 / its share of the steps):
    the report's ``traffic.all_in``, by the dashboard's own function."""
    card = (traffic or {}).get("all_in")
    if not card or not card["honest_bytes"]:
        return []
    ours, theirs = card["honest_bytes"], card["data_parallel_bytes"]
    warm = (
        "and the warm start's steps counted as data-parallel on both sides"
        if card.get("warm_start_bytes")
        else "no warm start"
    )
    words = f"{card['words']} ({ours:,} B against {theirs:,} B: every round, {warm})"
    return [("traffic vs data-parallel, all-in", words)]


def warm_start_rows(warm: dict[str, Any] | None) -> list[tuple[str, str]]:
    """One row for the warm start, if the run had one."""
    if not warm:
        return []
    return [
        (
            "warm start",
            f"{warm['steps']} data-parallel steps of {warm['samples_per_step']} samples before"
            f" round 0, trained by the operator: a ring of {warm['devices']} devices would"
            f" carry {warm['data_parallel_bytes']:,} bytes for them (not in the rounds above)",
        )
    ]


def baseline_words(baseline: dict[str, Any] | None) -> str:
    """``data-parallel on the same tokens: 5.10, +1.4 %; `` (empty without a baseline)."""
    if baseline is None:
        return ""
    if baseline.get("gap_pct") is None:
        return f"no data-parallel baseline: {baseline.get('error') or 'no round trained'}; "
    return (
        f"data-parallel on the same tokens: {_fmt(baseline['final_heldout_loss'])},"
        f" {baseline['gap_pct']:+.1f} %; "
    )


def _pct(share: float) -> str:
    return f"{100 * share:.0f} %" if share >= 0.1 else f"{100 * share:.1f} %"


def utilisation_words(u: dict[str, Any]) -> str:
    """``17 % of wall time (compute 13.1 s of 79.5 s per round); waiting: deadline 9 %,
    …`` for a :func:`hypertrain.devnet.utilisation.summary` (every cause it timed)."""
    waits = ", ".join(f"{cause} {_pct(share)}" for cause, share in u["waiting_share"].items())
    return (
        f"{_pct(u['utilisation'])} of wall time (compute {u['compute_s_per_round']:.1f} s"
        f" of {u['wall_s_per_round']:.1f} s per round); waiting: {waits or 'none'}"
    )


def utilisation_rows(util: dict[str, Any]) -> list[tuple[str, str]]:
    """The whole run's utilisation of the honest islands, after probation, and what makes
    an island's figures partial (rows only for what the report holds)."""
    run, steady = util.get("run") or {}, util.get("steady") or {}
    rows = []
    if run.get("utilisation") is not None:
        label = f"island utilisation, whole run ({run['islands']} honest islands)"
        rows.append((label, utilisation_words(run)))
    # each island's last round ends at its upload (no wait after it): a figure needs at
    # least one whole round, upload to next round_start, or it reads near 100 %
    if steady.get("utilisation") is not None and steady["rounds"] > steady["islands"]:
        label = f"island utilisation, rounds >= {steady['from_round']} ({steady['basis']})"
        rows.append((label, utilisation_words(steady)))
    for name, island in (util.get("islands") or {}).items():
        if island.get("notes"):
            rows.append((f"utilisation of {name}: partial", "; ".join(island["notes"])))
    return rows


def summary_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    rounds = report["rounds"]
    first = rounds[0]["heldout_loss"] if rounds else None
    last = rounds[-1]["heldout_loss"] if rounds else None
    drop = None if first is None or last is None else first - last
    hp = report["honeypot"]
    rows = [
        (
            "final held-out loss",
            f"{_fmt(last)} ({baseline_words(report.get('baseline'))}after the first round:"
            f" {_fmt(first)}, drop {_fmt(drop)})",
        ),
        ("rounds", str(len(rounds))),
        (
            "tokens merged",
            f"{report.get('tokens_merged', 0):,} (committed: {sum(r['tokens'] for r in rounds):,};"
            " a faulted island's tokens are left out of its rounds' merges)",
        ),
        *all_in_rows(report.get("traffic")),
        *traffic_rows(report.get("traffic")),
        *warm_start_rows(report.get("warm_start")),
        ("audits run", str(sum(r["audits"] for r in rounds))),
        (
            "accusations (islands accused in a round, summed over rounds)",
            str(sum(r["accused"] for r in rounds)),
        ),
        (
            "honeypot",
            f"{hp.get('name', '')} {_short(hp['hotkey'])} {hp['strategy']}"
            f" (honest for {hp.get('honest_rounds', 0)} rounds): caught={hp['caught']}",
        ),
        ("honeypot fault cost", fault_line(hp)),
        ("rollbacks", rollback_line(report.get("rollbacks") or [])),
        ("ledger verified", str(report["ledger_verified"])),
    ]
    total = sum(m["weight"] or 0 for m in report["miners"])
    for m in report["miners"]:
        share = f"{(m['weight'] or 0) / total:.3f}" if total else "—"
        rows.append(
            (
                f"miner {m['name']} {_short(m['hotkey'])}",
                f"escrow {m['escrow']:,}  paid {m.get('paid', 0):,}  burned {m['burned']:,}"
                f"  weight {share}",
            )
        )
    util = report.get("utilisation") or {}
    rows[2:2] = utilisation_rows(util)
    if util.get("mean") is not None:
        rows.insert(
            2,
            (
                "island compute utilisation",
                f"{100 * util['mean']:.0f} % (compute {util['compute_s']:.1f} s"
                f" of a {util['wall_s']:.1f} s round, mean)",
            ),
        )
    rows.append(("model export", str(report["model_export"])))
    if report.get("sample"):
        rows.append(("sample", report["sample"]))
    return rows
