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
import sqlite3
from typing import Final

from hypertrain.api.models import Phase, RosterEntry, RoundSummary, RunSummary
from hypertrain.challenge import facts
from hypertrain.challenge.dashboard import baseline, panels, utilisation
from hypertrain.challenge.dashboard.models import (
    AuditDispute,
    AuditRow,
    AuditVerdict,
    CompressionCard,
    CurvePoint,
    DashBeacon,
    Dashboard,
    DashRound,
    Glance,
    InnerCard,
    IslandCard,
    ModelCard,
    OuterCard,
    TrafficPanel,
)
from hypertrain.challenge.dashboard.traffic import (
    expected_steady,
    round_traffic,
    warm_start_bytes,
)
from hypertrain.challenge.rounds import views
from hypertrain.challenge.settings import Settings
from hypertrain.challenge.state import ServiceState, loads
from hypertrain.challenge.store import (
    audit_storage,
    commit_storage,
    game_storage,
    merge_storage,
    rounds_storage,
    verdict_storage,
)
from hypertrain.protocol.manifest import ModelSpec, RunManifest
from hypertrain.protocol.messages import Verdict
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


def chain_timing(s: Settings) -> tuple[int, int]:
    """(genesis unix seconds, period seconds) of the beacon chain the service follows."""
    path = s.beacon_info_file
    if path is None:
        return QUICKNET_GENESIS, QUICKNET_PERIOD_S
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        return int(info["genesis_time"]), int(info["period"])
    except (OSError, ValueError, KeyError, TypeError):
        return QUICKNET_GENESIS, QUICKNET_PERIOD_S


def model_card(manifest: RunManifest) -> ModelCard:
    spec = manifest.model
    return ModelCard(
        spec=spec,
        preset=spec.preset,
        layers=spec.num_layers,
        d_model=spec.d_model,
        heads=spec.num_heads,
        context=spec.context_length,
        vocab=spec.vocab_size,
        parameters=param_count(spec),
        moe=spec.moe,
        inner=InnerCard(
            name=manifest.inner.name,
            lr=manifest.inner.lr,
            weight_decay=manifest.inner.weight_decay,
            steps_per_round=manifest.round.inner_steps,
            checkpoint_interval=manifest.round.checkpoint_interval,
        ),
        outer=outer_card(manifest.outer.nesterov, manifest.outer.lr, manifest.outer.momentum),
        compression=_compression(manifest),
    )


def outer_card(nesterov: bool, lr: float, momentum: float) -> OuterCard:
    """The outer optimizer and what it does in words: an outer step of lr 1 without
    momentum sets the model to the islands' averaged model, so it is plain averaging."""
    name = "nesterov-sgd" if nesterov else "sgd"
    if lr == 1 and momentum == 0:
        words = "plain averaging (outer lr 1, no momentum)"
    elif momentum == 0:
        words = f"SGD, lr {lr:g}, no momentum"
    else:
        kind = "Nesterov momentum" if nesterov else "SGD with momentum"
        words = f"{kind}, lr {lr:g}, momentum {momentum:g}"
    return OuterCard(name=name, lr=lr, momentum=momentum, words=words)


def _compression(manifest: RunManifest) -> CompressionCard:
    spec = manifest.compression
    if spec.sparse is None:
        return CompressionCard(
            codec=spec.codec,
            error_feedback=spec.error_feedback,
            entropy=spec.entropy,
            block_size=spec.block_size,
        )
    return CompressionCard(
        codec=spec.codec,
        error_feedback=spec.error_feedback,
        chunk_size=spec.sparse.chunk_size,
        topk_per_chunk=spec.sparse.topk_per_chunk,
        value_bits=spec.sparse.value_bits,
    )


def round_rows(
    conn: sqlite3.Connection,
    settings: Settings,
    run_id: str,
    manifest: RunManifest,
    summaries: list[RoundSummary],
) -> tuple[list[DashRound], list[TrafficRound]]:
    """Recent rounds (``summaries``: :func:`views.round_summaries`) with timing, bytes and
    the data-parallel comparison, and each round's traffic count (the same count the tile
    sums)."""
    genesis, period = chain_timing(settings)
    timing = rounds_storage.timing(conn, run_id)
    params = param_count(manifest.model)
    out, counts = [], []
    for s in summaries:
        t = timing[s.round]
        opened, last_commit, merged = t.opened, t.last_commit, t.merged
        compute = (last_commit - opened) * period if last_commit else None
        sync = (merged - last_commit) * period if merged and last_commit else None
        count = round_traffic(conn, run_id, manifest, s, params)
        counts.append(count)
        out.append(
            DashRound(
                **s.model_dump(),
                islands=s.commits,
                started_unix=genesis + (opened - 1) * period,
                compute_s=compute,
                sync_s=sync,
                bytes_sent=s.update_bytes,
                traffic=count.ours.parts(),
                honest_bytes=count.ours.total(),
                data_parallel_bytes=count.data_parallel,
                probation=count.probation,
                ratio=ratio(count.data_parallel, count.ours.total()),
                ratio_words=ratio_words(count.data_parallel, count.ours.total()),
            )
        )
    return out, counts


def audit_rows(
    conn: sqlite3.Connection, run_id: str, accused: dict[int, dict[str, str]]
) -> list[AuditRow]:
    """Every audit: the selecting beacon round, the segments, verdicts and disputes
    (``accused``: :func:`views.run_accusations`)."""
    standing = {v.verdict_id: v for v in facts.standing_verdicts(conn, run_id)}
    out = []
    for a in audit_storage.audits(conn, run_id):
        verdicts = [
            _audit_verdict(v, standing[v.verdict_id].standing == "stands")
            for v in verdict_storage.verdicts_on(conn, run_id, a.round, a.hotkey)
        ]
        disputes = [
            AuditDispute(status=g.outcome or g.stage, reason=f"dispute {g.dispute_id[:12]}")
            for g in game_storage.games_on(conn, run_id, a.round, a.hotkey)
        ]
        out.append(
            AuditRow(
                round=a.round,
                hotkey=a.hotkey,
                segments=loads(a.segments),
                probation=a.probation,
                beacon_round=a.selection_beacon_round,
                beacon_randomness=a.randomness,
                verdicts=verdicts,
                disputes=disputes,
                accused=a.hotkey in accused.get(a.round, {}),
            )
        )
    return out


def _audit_verdict(row: verdict_storage.VerdictRow, counts: bool) -> AuditVerdict:
    body = Verdict.model_validate_json(row.body)
    return AuditVerdict(
        auditor=row.auditor,
        result=row.result,
        first_bad_leaf=body.first_bad_leaf,
        detail=body.detail,
        counts=counts,
    )


def merged_commits(
    conn: sqlite3.Connection, run_id: str, rounds: list[DashRound]
) -> list[commit_storage.CommitTokens]:
    """The commits a merge included: the tokens that went into the model. A rejected
    round's commits (its island caught, or left out of the merge) are not among them."""
    included = {}
    for r in rounds:
        tape = facts.merge_tape(conn, run_id, r.round) if r.new_model_sha256 else None
        if tape is not None:
            included[r.round] = frozenset(tape.included)
    commits = commit_storage.commit_tokens(conn, run_id)
    return [c for c in commits if c.hotkey in included.get(c.round, frozenset())]


def _island_rows(
    conn: sqlite3.Connection,
    settings: Settings,
    manifest: RunManifest,
    run_id: str,
    rounds: list[DashRound],
    roster: list[RosterEntry],
    merged: list[commit_storage.CommitTokens],
) -> list[IslandCard]:
    inner_steps = manifest.round.inner_steps
    current = rounds[-1].round if rounds else None
    compute = {r.round: r.compute_s for r in rounds}
    commits = commit_storage.commit_tokens(conn, run_id)
    total_tokens = sum(c.tokens for c in merged)
    genesis, period = chain_timing(settings)
    out = []
    for entry in roster:
        mine = [c for c in commits if c.hotkey == entry.hotkey]
        kept = [c for c in merged if c.hotkey == entry.hotkey]
        seconds = sum(compute.get(c.round) or 0 for c in kept)
        tokens = sum(c.tokens for c in kept)
        synced = [c.round for c in kept]
        done_now = any(c.round == current for c in mine)
        synced_at = merge_storage.last_sync(conn, run_id, entry.hotkey)
        hardware = panels.island_hardware(conn, run_id, entry.hotkey)
        out.append(
            IslandCard(
                **entry.model_dump(),
                nodes=hardware.nodes,
                device_model=hardware.device_model,
                region=hardware.region,
                last_sync_unix=None if synced_at is None else genesis + (synced_at - 1) * period,
                name=island_name(entry.hotkey, entry.uid),
                rounds=len(mine),
                tokens_merged=tokens,
                tokens_per_s=tokens / seconds if seconds else None,
                share=tokens / total_tokens if total_tokens else 0.0,
                steps_done=inner_steps if done_now else 0,
                steps_total=inner_steps,
                last_sync_round=max(synced) if synced else None,
            )
        )
    return out


def island_name(hotkey: str, uid: int | None) -> str:
    """An island's one name everywhere: ``island-<uid>`` on the metagraph, else its key."""
    return f"island-{uid}" if uid is not None else f"{hotkey[:6]}…{hotkey[-4:]}"


def dashboard(state: ServiceState, run_id: str) -> Dashboard:
    """Everything the dashboard draws, for one run."""
    manifest = state.manifest(run_id)
    conn, settings = state.conn, state.settings
    summaries = views.round_summaries(state, run_id)
    rounds, counts = round_rows(conn, settings, run_id, manifest, summaries)
    merged = merged_commits(conn, run_id, rounds)
    islands = sorted(  # island-1, island-2, ...: by metagraph uid
        _island_rows(conn, settings, manifest, run_id, rounds, views.roster(state, run_id), merged),
        key=lambda i: (i.uid is None, i.uid or 0, i.hotkey),
    )
    # verified figures only: the held-out loss of each merged model (merge tape); the
    # islands' own training loss rides along, labelled self-reported
    curve = [
        CurvePoint(round=r.round, heldout_loss=r.eval_loss, train_loss_self_reported=r.train_loss)
        for r in rounds
        if r.eval_loss is not None
    ]
    genesis, period = chain_timing(settings)
    islands_of = [r.islands for r in rounds]
    params = param_count(manifest.model)
    expected = expected_steady(manifest, counts, islands_of, params)
    warm = warm_start_bytes(manifest, islands_of[0] if islands_of else 1, params)
    traffic = panels.traffic_panel(summarize(counts), expected, warm)
    glance = _glance(views.run_summary(state, run_id), manifest, rounds, islands, traffic)
    return Dashboard(
        run_id=run_id,
        glance=glance,
        beacon=DashBeacon(
            genesis_unix=genesis, period_s=period, **state.beacon_status().model_dump()
        ),
        model=model_card(manifest),
        curve=curve,
        curve_summary=panels.curve_summary(curve, glance.rounds_done, glance.rounds_total),
        baseline=baseline.panel(conn, run_id, curve),
        round_stations=panels.stations(rounds[-1] if rounds else None),
        islands=islands,
        rounds=rounds,
        audits=audit_rows(conn, run_id, views.run_accusations(state, run_id)),
        traffic=traffic,
        honeypots=panels.honeypot_panel(state, run_id),
        disputes=panels.dispute_rows(state, run_id),
        utilisation=utilisation.panel(state, run_id, period, {i.hotkey: i.name for i in islands}),
    )


def _glance(
    summary: RunSummary,
    manifest: RunManifest,
    rounds: list[DashRound],
    islands: list[IslandCard],
    traffic: TrafficPanel,
) -> Glance:
    """The headline tiles (``summary``: :func:`views.run_summary`): status, round, loss,
    islands, speed, tokens, bytes, audits."""
    losses = [r.eval_loss for r in rounds if r.eval_loss is not None]
    current = rounds[-1] if rounds else None
    active = [i for i in islands if i.status in ("probation", "active")]
    merged = sum(1 for r in rounds if r.phase in MERGED_PHASES)
    planned = baseline.planned_rounds(manifest)
    return Glance(
        status=_status(current.phase if current else None, merged, planned),
        round=current.round if current else None,
        phase=current.phase if current else None,
        rounds_done=merged,
        rounds_total=planned,
        heldout_loss=losses[-1] if losses else None,
        first_heldout_loss=losses[0] if losses else None,
        islands=len(active),  # the roster: the same islands the cards list
        tokens_per_s=sum(i.tokens_per_s or 0 for i in active),
        tokens=sum(i.tokens_merged for i in islands),  # the same count as the cards' share
        bytes_sent=sum(r.bytes_sent for r in rounds),
        traffic=traffic,
        audits=summary.audits_total,
        beacon_round=summary.beacon_round,
        accused=summary.accused_total,
        proven_faults=summary.proven_faults_total,
    )


PHASE_WORDS: Final = {
    "train": "training",
    "beacon": "waiting for the audit beacon",
    "audit": "auditing",
    "merge": "merging",
    "settle": "merged; settling after the dispute window",
    "final": "between rounds",
}


MERGED_PHASES: Final = frozenset({"settle", "final"})


def _status(phase: Phase | None, merged: int, planned: int) -> str:
    """The run's state in words (``phase``: the current round's, None before round 0);
    ``finished`` once the schedule's rounds are merged."""
    if phase is None:
        return "waiting for the first round"
    if merged >= planned and phase == "final":
        return "finished"
    return PHASE_WORDS.get(phase, phase)
