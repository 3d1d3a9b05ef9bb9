"""The devnet's rollbacks, read from the service's structured records, never from logs.

A fault proven after its round was merged is a row of ``GET /v1/runs/{run}/faults``
(``merged``, ``rollback_due``); the aggregator answers it with signed
``merge-correction``s, one per corrected round, each citing the faults it answers
(``GET /v1/runs/{run}/rounds/{i}``, ``corrections``). A rollback's depth is how many
rounds after the faulty one were replayed onto the corrected model; its corrected model
is the faulty round's current tape's ``new_model_sha256``, and the head is the newest
corrected round's. ``resumed_round`` is the first round after the rebase that opened on
that head model (its signed round-open record's start model): where the islands moved
to the corrected chain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypertrain.api.client import ChallengeClient
from hypertrain.api.models import ProvenFault, RoundDetail
from hypertrain.protocol.messages import MergeCorrection


def corrected_rounds(details: Mapping[int, RoundDetail], fault: ProvenFault) -> list[int]:
    """The rounds whose signed corrections cite ``fault``, in order."""
    out = []
    for index in sorted(details):
        for env in details[index].corrections:
            cited = MergeCorrection.model_validate(env.body).faults
            if any(f.round == fault.round and f.hotkey == fault.hotkey for f in cited):
                out.append(index)
                break
    return out


def resumed_round(starts: Mapping[int, str | None], after: int, model: str | None) -> int | None:
    """The first round after ``after`` whose signed start model is ``model`` (or None)."""
    later = [i for i in sorted(starts) if i > after and model and starts[i] == model]
    return later[0] if later else None


def rollback_rows(
    faults: list[ProvenFault],
    details: Mapping[int, RoundDetail],
    starts: Mapping[int, str | None] | None = None,
    names: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One row per fault proven after its merge: round, island, depth, models, state.

    ``starts``: each round's signed start model (for ``resumed_round``); ``names``: the
    devnet's name of each hotkey (``island``)."""
    rows = []
    for fault in faults:
        if not fault.merged:
            continue  # excluded at the merge: nothing to roll back
        rounds = corrected_rounds(details, fault)
        own = details.get(fault.round)
        head = details.get(rounds[-1]) if rounds else None
        own_tape = own.current_merge() if own is not None and rounds else None
        head_tape = head.current_merge() if head is not None else None
        head_model = head_tape.new_model_sha256 if head_tape else None
        rows.append(
            {
                "round": fault.round,
                "hotkey": fault.hotkey,
                "island": (names or {}).get(fault.hotkey, fault.hotkey[:8]),
                "reason": fault.reason,
                "corrected": bool(rounds) and not fault.rollback_due,
                "depth": rounds[-1] - fault.round if rounds else None,
                "corrected_rounds": rounds,
                "corrected_model_sha256": own_tape.new_model_sha256 if own_tape else None,
                "head_model_sha256": head_model,
                "resumed_round": resumed_round(starts or {}, rounds[-1], head_model)
                if rounds
                else None,
            }
        )
    return rows


def rollback_line(rows: list[dict[str, Any]]) -> str:
    """The summary's rollback row: each rollback, or why there was none."""
    if not rows:
        return "none (no fault was proven after its round was merged)"
    parts = []
    for r in rows:
        if not r["corrected"]:
            parts.append(f"round {r['round']}: due, not yet corrected")
            continue
        who = f"{r.get('island') or ''} {str(r['hotkey'])[:8]}…".strip()
        model = str(r["corrected_model_sha256"])[:12]
        resumed = r.get("resumed_round")
        moved = f", islands on it from round {resumed}" if resumed is not None else ""
        parts.append(
            f"round {r['round']} {who} (depth {r['depth']}): corrected model {model}…{moved}"
        )
    return "; ".join(parts)


def read_rollbacks(
    url: str, run_id: str, names: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """:func:`rollback_rows` of a live service: its proven faults and every merged
    round's record (corrections included)."""
    with ChallengeClient(url) as service:
        faults = service.proven_faults(run_id)
        if not any(f.merged for f in faults):
            return []
        summaries = service.rounds(run_id)
        merged = [s.round for s in summaries if s.new_model_sha256]
        details = {index: service.round_detail(run_id, index) for index in merged}
    starts = {s.round: s.start_model_sha256 for s in summaries}
    return rollback_rows(faults, details, starts, names)


def rollback_pending(url: str, run_id: str) -> bool:
    """True while a proven fault's rollback is due (the aggregator has not corrected it)."""
    with ChallengeClient(url) as service:
        return any(f.rollback_due for f in service.proven_faults(run_id))
