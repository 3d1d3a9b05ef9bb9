"""The run report: one JSON document (keys fixed by the issue) and its Markdown twin."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypertrain.challenge.dashboard.panels import all_in_card, traffic_panel
from hypertrain.devnet.keys import Secrets
from hypertrain.devnet.view import summary_rows
from hypertrain.protocol.manifest import RunManifest, param_count
from hypertrain.protocol.traffic import (
    AllIn,
    RoundBytes,
    TrafficRound,
    TrafficTotal,
    data_parallel_bytes,
    summarize,
)


def build_report(
    doc: dict[str, Any],
    secrets: Secrets,
    *,
    strategy: str,
    weights: dict[str, Any],
    ledger_verified: bool,
    model_export: str | None,
    children_left: int,
    layouts: list[dict[str, int]] | None = None,
    layouts_applied: bool = False,
    utilisation: dict[str, Any] | None = None,
    sample: str = "",
    honest_rounds: int = 0,
    journal: list[dict[str, Any]] | None = None,
    rollbacks: list[dict[str, Any]] | None = None,
    scenario: str = "default",
    warm_start: dict[str, Any] | None = None,
    baseline: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Per-round figures, the honeypot's fate, ledger, weights and the export path.

    ``journal`` is the run's ledger journal (``hypertrain ledger export``): the
    honeypot's escrow before its first fault and the burn come from its entries.
    ``rollbacks``: :func:`hypertrain.devnet.rollbacks.rollback_rows` of the service's
    proven faults and signed corrections. ``warm_start``: :func:`warm_start_row`.
    ``baseline``: ``devnet.baseline.BaselineThread.finish``'s answer (data-parallel on the
    same tokens), summarised by :func:`baseline_row`.
    """
    rounds = [
        {
            "round": r["round"],
            "heldout_loss": r["eval_loss"],  # the aggregator's figure, as on the dashboard
            "train_loss": r["train_loss"],
            "tokens": r["tokens"],
            "bytes_sent": r["bytes_sent"],
            "traffic": r["traffic"],
            "honest_bytes": r["honest_bytes"],
            "data_parallel_bytes": r["data_parallel_bytes"],
            "ratio_words": r["ratio_words"],
            "probation": r["probation"],
            "audits": r["audits"],
            "accused": r["verdicts"]["mismatch"],
            "compute_s": r["compute_s"],
            "sync_s": r["sync_s"],
        }
        for r in doc["rounds"]
        if r["phase"] == "final"
    ]
    honeypot = secrets.islands[-1]
    caught = any(a["accused"] and a["hotkey"] == honeypot.ss58 for a in doc["audits"])
    names = {m.ss58: m.name for m in secrets.islands}
    weight_map = weights.get("weights", {})
    return {
        "run_id": doc["run_id"],
        "scenario": scenario,
        "rounds": rounds,
        # the dashboard's own figure: tokens of the islands each round's merge included
        "tokens_merged": doc.get("glance", {}).get("tokens", 0),
        "honeypot": {
            "name": honeypot.name,
            "hotkey": honeypot.ss58,
            "strategy": strategy,
            "caught": caught,
            "honest_rounds": honest_rounds,
            **fault_cost(journal or [], honeypot.ss58, weight_map),
        },
        "ledger_verified": ledger_verified,
        "rollbacks": rollbacks or [],
        "weights": weights,
        # the dashboard's own count, with its steady state expected at the audit rate
        "traffic": {**traffic_summary(rounds, warm_start), "expected": expected_traffic(doc)},
        "warm_start": warm_start,
        "baseline": baseline_row(rounds, baseline),
        "model_export": model_export,
        "sample": sample,
        "utilisation": utilisation or {"per_round": [], "mean": None},
        "children_left": children_left,
        "model": doc["model"],
        "island_layouts": {
            "applied": layouts_applied,
            "planned": {
                m.name: lay for m, lay in zip(secrets.islands, layouts or [], strict=False)
            },
        },
        "miners": [
            {
                "name": names.get(i["hotkey"], "?"),
                "honeypot": i["hotkey"] == honeypot.ss58,
                "hotkey": i["hotkey"],
                "status": i["status"],
                "tokens": i["tokens"],
                "escrow": i["escrow"],
                "vested": i["vested"],
                "paid": i.get("paid", 0),
                "burned": i["burned"],
                "weight": weight_map.get(i["hotkey"]),
            }
            for i in doc["islands"]
        ],
    }


def baseline_row(
    rounds: list[dict[str, Any]], baseline: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The data-parallel baseline's held-out loss per round beside the network's, and the
    final gap (None: no baseline was trained; ``error`` says why one has no figures)."""
    if baseline is None:
        return None
    losses = list(baseline.get("heldout_loss") or [])
    n = min(len(losses), len(rounds))
    final = rounds[n - 1]["heldout_loss"] if n else None
    gap = None if final is None or not n else 100 * (final / losses[n - 1] - 1)
    return {
        "heldout_loss": losses[:n],
        "final_heldout_loss": losses[n - 1] if n else None,
        "network_heldout_loss": final,
        "gap_pct": gap,
        "rounds": n,
        "error": baseline.get("error"),
    }


def fault_cost(
    journal: list[dict[str, Any]], hotkey: str, weights: dict[str, Any]
) -> dict[str, Any]:
    """What the first proven fault cost ``hotkey``, from the ledger journal's entries.

    ``escrow_before_fault``: the rewards escrowed for it in the rounds before the
    round of its first fault; ``burned``: every fault burn (escrow and unpaid vested
    value); ``weight_after``: its weight in the final ``get_weights`` (0 when absent).
    """
    mine = [e for e in journal if e.get("hotkey") == hotkey]
    faults = [e for e in mine if e.get("kind") == "fault"]
    first = min((int(e["point"]) for e in faults), default=None)
    escrowed = sum(
        int(e["amount"])
        for e in mine
        if e.get("kind") == "escrow" and (first is None or int(e["point"]) < first)
    )
    return {
        "first_fault_round": first,
        "escrow_before_fault": escrowed,
        "burned": sum(int(e["amount"]) for e in faults),
        "weight_after": weights.get(hotkey) or 0,
    }


def read_journal(text: str) -> list[dict[str, Any]]:
    """The JSON-lines journal that ``hypertrain ledger export --out -`` writes."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def warm_start_row(manifest: RunManifest, devices: int) -> dict[str, Any] | None:
    """The warm start the operator trained before round 0, and the bytes a data-parallel
    ring of ``devices`` would carry for its steps (none of them cross the run's links)."""
    warm = manifest.warm_start
    if warm is None:
        return None
    params = param_count(manifest.model)
    return {
        "steps": warm.steps,
        "samples_per_step": warm.samples_per_step,
        "devices": devices,
        "data_parallel_bytes": data_parallel_bytes(params, devices, warm.steps),
    }


def expected_traffic(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The dashboard's steady state expected at the audit rate (None: no steady round
    yet, or a document from before the service reported it)."""
    expected: dict[str, Any] | None = (doc.get("glance") or {}).get("traffic", {}).get("expected")
    return expected


def traffic_summary(
    rounds: list[dict[str, Any]], warm_start: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The finished rounds' traffic, by the dashboard's own function (the tile's terms):
    all-in (with the warm start of :func:`warm_start_row`), all rounds, the steady state
    and the probation rounds, against data-parallel."""
    counts = [
        TrafficRound(
            r["round"], RoundBytes(**r["traffic"]), r["data_parallel_bytes"], r["probation"]
        )
        for r in rounds
    ]
    return traffic_panel(summarize(counts), warm_start=_warm_bytes(warm_start)).model_dump()


def all_in_of(traffic: dict[str, Any], warm_start: dict[str, Any] | None) -> dict[str, Any]:
    """A report's all-in card: its own, or for a report written before reports carried
    one, the same card from its ``traffic.all`` total and its warm start."""
    if traffic.get("all_in"):
        card: dict[str, Any] = traffic["all_in"]
        return card
    t = traffic["all"]
    total = TrafficTotal(t["rounds"], RoundBytes(**t["parts"]), t["data_parallel_bytes"])
    return all_in_card(AllIn(total, _warm_bytes(warm_start))).model_dump()


def _warm_bytes(warm_start: dict[str, Any] | None) -> int:
    return int((warm_start or {}).get("data_parallel_bytes", 0))


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Hypertrain devnet report", "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in summary_rows(report)]
    header = (
        "| round | held-out loss | tokens | bytes moved | data-parallel bytes | traffic"
        " | audits | accused |"
    )
    lines += ["", "## Rounds", "", header, "|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in report["rounds"]:
        loss = "—" if r["heldout_loss"] is None else f"{r['heldout_loss']:.4f}"
        lines.append(
            f"| {r['round']} | {loss} | {r['tokens']:,} | {r['honest_bytes']:,} |"
            f" {r['data_parallel_bytes']:,} | {r['ratio_words']}"
            f"{' (probation)' if r['probation'] else ''} | {r['audits']} | {r['accused']} |"
        )
    lines += utilisation_table(report.get("utilisation") or {})
    lines += ["", f"children left after exit: {report['children_left']}", ""]
    return "\n".join(lines)


def utilisation_table(util: dict[str, Any]) -> list[str]:
    """Per island: rounds uploaded, compute and wall seconds over the whole run, the
    waits by cause and what makes its figures partial (none without whole-run figures)."""
    islands = util.get("islands") or {}
    if not islands:
        return []
    lines = ["", "## Utilisation (whole run)", ""]
    lines += ["| island | rounds | compute s | wall s | utilisation | waiting s | partial |"]
    lines += ["|---|---:|---:|---:|---:|---|---|"]
    for name, u in islands.items():
        share = "—" if u["utilisation"] is None else f"{100 * u['utilisation']:.1f} %"
        waits = ", ".join(f"{c} {s:.1f}" for c, s in u["waiting_s"].items()) or "—"
        lines.append(
            f"| {name}{'' if u['honest'] else ' (honeypot)'} | {u['rounds']} |"
            f" {u['compute_s']:.1f} | {u['wall_s']:.1f} | {share} | {waits} |"
            f" {'; '.join(u['notes']) or '—'} |"
        )
    return lines


def write_report(report: dict[str, Any], json_path: Path) -> Path:
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    md = json_path.with_suffix(".md")
    md.write_text(markdown(report), encoding="utf-8")
    return md


def write_dashboard(doc: dict[str, Any], json_path: Path) -> Path:
    """The final dashboard document beside the report (``<report>-dashboard.json``), so the
    page can be checked against what the devnet showed after its service is gone."""
    out = _dashboard_path(json_path)
    out.write_text(json.dumps(doc, sort_keys=True) + "\n", encoding="utf-8")
    return out


def clear_reports(json_path: Path) -> None:
    """Remove an earlier run's report, its markdown and its dashboard document."""
    for path in (json_path, json_path.with_suffix(".md"), _dashboard_path(json_path)):
        path.unlink(missing_ok=True)


def write_failed(reason: str, doc: dict[str, Any] | None, logs: Path, json_path: Path) -> Path:
    """A failed run's partial report: marked failed, the reason, where its logs are kept
    and the rounds it reached (from the last dashboard document it read, if any)."""
    rounds = [
        {"round": r["round"], "phase": r["phase"], "eval_loss": r.get("eval_loss")}
        for r in (doc or {}).get("rounds", [])
    ]
    failed = {"status": "failed", "reason": reason, "logs": str(logs), "rounds": rounds}
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(failed, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    lines = ["# Hypertrain devnet report: FAILED", "", reason, "", f"Logs: {logs}", ""]
    lines += ["| round | phase | held-out loss |", "|---:|---|---:|"]
    lines += [f"| {r['round']} | {r['phase']} | {r['eval_loss']} |" for r in rounds]
    md = json_path.with_suffix(".md")
    md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return md


def _dashboard_path(json_path: Path) -> Path:
    return json_path.with_name(json_path.stem + "-dashboard.json")
