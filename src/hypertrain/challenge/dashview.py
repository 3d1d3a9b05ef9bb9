"""The dashboard's one read-only JSON document: ``GET /v1/runs/{run_id}/dashboard``.

The web page polls this single view instead of stitching five routes together, so
every panel is drawn from one consistent database read. Everything here is derived
from public records: commits, audit assignments, verdicts, disputes, merges, the
beacon rounds that chose the audits, and the ledger's balances.

Time is measured in beacon rounds (the service's only clock) and converted to
seconds with the beacon chain's period. "Compute" is from a round's opening to
its last accepted commit; "sync" from that commit to the accepted merge tape.
Traffic is counted once, by ``challenge.traffic`` with ``protocol.traffic``'s
baseline (a bf16 ring all-reduce every step, sent and received): the rounds table and
the headline tile show the same terms, so they cannot disagree.
"""

from __future__ import annotations

import json
from typing import Any, Final

from hypertrain.challenge import dashpanels, facts, views
from hypertrain.challenge.dashmodels import Dashboard
from hypertrain.challenge.models import RosterEntry
from hypertrain.challenge.state import ServiceState, loads
from hypertrain.challenge.traffic import round_traffic, traffic_fields
from hypertrain.protocol.manifest import ModelSpec, RunManifest
from hypertrain.protocol.traffic import TrafficRound, ratio, ratio_words, summarize

QUICKNET_GENESIS: Final = 1692803367
QUICKNET_PERIOD_S: Final = 3


def param_count(spec: ModelSpec) -> int:
    """Trainable scalars of a model spec (same count as the trainer's presets)."""
    dense = 3 * spec.d_model * spec.ffn_hidden
    ffn = dense if spec.moe is None else spec.moe.num_experts * (dense + spec.d_model)
    block = 4 * spec.d_model * spec.d_model + ffn + 2 * spec.d_model
    head = 0 if spec.tied_embeddings else spec.vocab_size * spec.d_model
    return spec.vocab_size * spec.d_model + spec.num_layers * block + spec.d_model + head


def chain_timing(state: ServiceState) -> tuple[int, int]:
    """(genesis unix seconds, period seconds) of the beacon chain the service follows."""
    path = state.settings.beacon_info_file
    if path is None:
        return QUICKNET_GENESIS, QUICKNET_PERIOD_S
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return int(info["genesis_time"]), int(info["period"])
    except (OSError, ValueError, KeyError, TypeError):
        return QUICKNET_GENESIS, QUICKNET_PERIOD_S


def model_card(manifest: RunManifest) -> dict[str, Any]:
    spec = manifest.model
    return {
        "spec": spec.model_dump(mode="json"),
        "preset": spec.preset,
        "layers": spec.num_layers,
        "d_model": spec.d_model,
        "heads": spec.num_heads,
        "context": spec.context_length,
        "vocab": spec.vocab_size,
        "parameters": param_count(spec),
        "moe": spec.moe.model_dump(mode="json") if spec.moe else None,
        "inner": {
            "name": manifest.inner.name,
            "lr": manifest.inner.lr,
            "weight_decay": manifest.inner.weight_decay,
            "steps_per_round": manifest.round.inner_steps,
            "checkpoint_interval": manifest.round.checkpoint_interval,
        },
        "outer": {
            "name": "nesterov-sgd" if manifest.outer.nesterov else "sgd",
            "lr": manifest.outer.lr,
            "momentum": manifest.outer.momentum,
        },
        "compression": _compression(manifest),
    }


def _compression(manifest: RunManifest) -> dict[str, Any]:
    spec = manifest.compression
    out: dict[str, Any] = {"codec": spec.codec, "error_feedback": spec.error_feedback}
    if spec.sparse is None:
        return {**out, "block_size": spec.block_size}
    return {**out, **spec.sparse.model_dump(mode="json")}


def _round_timing(state: ServiceState, run_id: str) -> dict[int, dict[str, Any]]:
    rows = state.conn.execute(
        """
        SELECT r.round, r.open_beacon_round,
          (SELECT MAX(accepted_beacon_round) FROM commits c
             WHERE c.run_id = r.run_id AND c.round = r.round) AS last_commit,
          (SELECT received_beacon_round FROM merges m
             WHERE m.run_id = r.run_id AND m.round = r.round) AS merged
        FROM rounds r WHERE r.run_id = ?
        """,
        (run_id,),
    ).fetchall()
    return {r["round"]: dict(r) for r in rows}


def round_rows(
    state: ServiceState, run_id: str, manifest: RunManifest
) -> tuple[list[dict[str, Any]], list[TrafficRound]]:
    """Recent rounds with timing, bytes and the data-parallel comparison, and each
    round's traffic count (the same count the tile sums)."""
    genesis, period = chain_timing(state)
    timing = _round_timing(state, run_id)
    params = param_count(manifest.model)
    out, counts = [], []
    for s in views.round_summaries(state, run_id):
        t = timing[s["round"]]
        compute = (t["last_commit"] - t["open_beacon_round"]) * period if t["last_commit"] else None
        sync = (
            (t["merged"] - t["last_commit"]) * period if t["merged"] and t["last_commit"] else None
        )
        count = round_traffic(state, run_id, manifest, s, params)
        counts.append(count)
        out.append(
            {
                **s,
                "islands": s["commits"],
                "started_unix": genesis + (t["open_beacon_round"] - 1) * period,
                "compute_s": compute,
                "sync_s": sync,
                "bytes_sent": s["update_bytes"],
                **traffic_fields(count),
                "ratio": ratio(count.data_parallel, count.ours.total()),
                "ratio_words": ratio_words(count.data_parallel, count.ours.total()),
            }
        )
    return out, counts


def audit_rows(state: ServiceState, run_id: str) -> list[dict[str, Any]]:
    """Every audit: the selecting beacon round, the segments, verdicts and disputes."""
    rows = state.conn.execute(
        """
        SELECT a.round, a.hotkey, a.segments, a.probation, r.selection_beacon_round,
               b.randomness
        FROM audits a JOIN rounds r ON r.run_id = a.run_id AND r.round = a.round
        LEFT JOIN beacons b ON b.round = r.selection_beacon_round
        WHERE a.run_id = ? ORDER BY a.round DESC, a.hotkey
        """,
        (run_id,),
    ).fetchall()
    standing = {v.verdict_id: v for v in facts.standing_verdicts(state.conn, run_id)}
    faults = facts.run_faults(state.conn, run_id)
    out = []
    for a in rows:
        args = (run_id, a["round"], a["hotkey"])
        verdicts = [
            {
                "auditor": v["auditor"],
                "result": v["result"],
                "first_bad_leaf": loads(v["body"]).get("first_bad_leaf"),
                "detail": loads(v["body"]).get("detail", ""),
                # False when a dispute overturned it or its auditor was found faulty
                "counts": standing[v["verdict_id"]].standing == "stands",
            }
            for v in state.conn.execute(
                "SELECT verdict_id, auditor, result, body FROM verdicts"
                " WHERE run_id = ? AND round = ? AND hotkey = ? ORDER BY auditor",
                args,
            )
        ]
        disputes = [
            {"status": d["outcome"] or d["stage"], "reason": f"dispute {d['dispute_id'][:12]}"}
            for d in state.conn.execute(
                "SELECT dispute_id, stage, outcome FROM dispute_games"
                " WHERE run_id = ? AND round = ? AND hotkey = ?",
                args,
            )
        ]
        out.append(
            {
                "round": a["round"],
                "hotkey": a["hotkey"],
                "segments": loads(a["segments"]),
                "probation": bool(a["probation"]),
                "beacon_round": a["selection_beacon_round"],
                "beacon_randomness": a["randomness"],
                "verdicts": verdicts,
                "disputes": disputes,
                "fault": a["hotkey"] in faults.get(a["round"], {}),
            }
        )
    return out


def _island_rows(
    state: ServiceState, run_id: str, rounds: list[dict[str, Any]], roster: list[RosterEntry]
) -> list[dict[str, Any]]:
    inner_steps = state.manifest(run_id).round.inner_steps
    current = rounds[-1]["round"] if rounds else None
    compute = {r["round"]: r["compute_s"] for r in rounds}
    merged = {r["round"] for r in rounds if r["new_model_sha256"]}
    commits = state.conn.execute(
        "SELECT hotkey, round, tokens FROM commits WHERE run_id = ? ORDER BY round", (run_id,)
    ).fetchall()
    total_tokens = sum(c["tokens"] for c in commits) or 0
    out = []
    for entry in roster:
        member = entry.model_dump()
        mine = [c for c in commits if c["hotkey"] == member["hotkey"]]
        seconds = sum(compute.get(c["round"]) or 0 for c in mine)
        tokens = sum(c["tokens"] for c in mine)
        synced = [c["round"] for c in mine if c["round"] in merged]
        done_now = any(c["round"] == current for c in mine)
        genesis, period = chain_timing(state)
        synced_at = dashpanels.last_sync(state, run_id, member["hotkey"])
        out.append(
            {
                **member,
                **dashpanels.island_hardware(state, run_id, member["hotkey"]),
                "last_sync_unix": None if synced_at is None else genesis + (synced_at - 1) * period,
                "name": island_name(member["hotkey"], member.get("uid")),
                "rounds": len(mine),
                "tokens_per_s": tokens / seconds if seconds else None,
                "share": tokens / total_tokens if total_tokens else 0.0,
                "steps_done": inner_steps if done_now else 0,
                "steps_total": inner_steps,
                "last_sync_round": max(synced) if synced else None,
            }
        )
    return out


def island_name(hotkey: str, uid: int | None) -> str:
    """An island's one name everywhere: ``island-<uid>`` on the metagraph, else its key."""
    return f"island-{uid}" if uid is not None else f"{hotkey[:6]}…{hotkey[-4:]}"


def dashboard(state: ServiceState, run_id: str) -> Dashboard:
    """Everything the dashboard draws, for one run."""
    manifest = state.manifest(run_id)
    summary = views.run_summary(state, run_id)
    rounds, counts = round_rows(state, run_id, manifest)
    islands = sorted(  # island-1, island-2, ...: by metagraph uid
        _island_rows(state, run_id, rounds, views.roster(state, run_id)),
        key=lambda i: (i.get("uid") is None, i.get("uid") or 0, i["hotkey"]),
    )
    losses = [r["eval_loss"] for r in rounds if r["eval_loss"] is not None]
    bytes_sent = sum(r["bytes_sent"] for r in rounds)
    current = rounds[-1] if rounds else None
    active = [i for i in islands if i["status"] in ("probation", "active")]
    genesis, period = chain_timing(state)
    # verified figures only: the held-out loss of each merged model (merge tape); the
    # islands' own training loss rides along, labelled self-reported
    curve = [
        {
            "round": r["round"],
            "heldout_loss": r["eval_loss"],
            "train_loss_self_reported": r["train_loss"],
        }
        for r in rounds
        if r["eval_loss"] is not None
    ]
    traffic = dashpanels.traffic_panel(summarize(counts))
    merged = sum(1 for r in rounds if r["phase"] in MERGED_PHASES)
    planned = -(-manifest.inner.total_steps // manifest.round.inner_steps)
    doc = {
        "run_id": run_id,
        "glance": {
            "status": _status(current, merged, planned),
            "round": current["round"] if current else None,
            "phase": current["phase"] if current else None,
            "rounds_done": merged,
            "rounds_total": planned,
            "heldout_loss": losses[-1] if losses else None,
            "first_heldout_loss": losses[0] if losses else None,
            "islands": len(active),  # the roster: the same islands the cards list
            "tokens_per_s": sum(i["tokens_per_s"] or 0 for i in active),
            "tokens": summary["tokens_total"],
            "bytes_sent": bytes_sent,
            "traffic": traffic,
            "audits": summary["audits_total"],
            "faults": summary["faults_total"],
            "beacon_round": summary["beacon_round"],
        },
        "beacon": {"genesis_unix": genesis, "period_s": period, **state.beacon_status()},
        "model": model_card(manifest),
        "curve": curve,
        "curve_summary": dashpanels.curve_summary(curve, len(rounds)),
        "round_stations": dashpanels.stations(current),
        "islands": islands,
        "rounds": rounds,
        "audits": audit_rows(state, run_id),
        "traffic": traffic,
        "honeypots": dashpanels.honeypot_panel(state, run_id),
        "disputes": dashpanels.dispute_rows(state, run_id),
    }
    return Dashboard.model_validate(doc)


PHASE_WORDS: Final = {
    "train": "training",
    "beacon": "waiting for the audit beacon",
    "audit": "auditing",
    "merge": "merging",
    "settle": "merged; settling after the dispute window",
    "final": "between rounds",
}


MERGED_PHASES: Final = frozenset({"settle", "final"})


def _status(current: dict[str, Any] | None, merged: int, planned: int) -> str:
    """The run's state in words; ``finished`` once the schedule's rounds are merged."""
    if current is None:
        return "waiting for the first round"
    if merged >= planned and current["phase"] == "final":
        return "finished"
    return str(PHASE_WORDS.get(current["phase"], current["phase"]))
