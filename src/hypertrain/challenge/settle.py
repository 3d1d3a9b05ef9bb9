"""Final settlement of a round: which commits earn, and the ledger call that pays them.

Settlement pays only proven work. A round is settled once :func:`ready_to_settle` says
so (its merge tape is in and its audit and dispute windows have closed). Then, for
each commit of the round:

* **paid** (by its committed token count) when its update is listed as included in the
  signed merge tape, no auditor returned a verdict other than ``match`` for it, and no
  assigned audit of it is still waiting for a verdict;
* **held** when it was included but an assigned audit has no verdict yet: its reward is
  escrowed with a hold that never releases on its own (:data:`PENDING_AUDIT`); a late
  ``match`` releases it (it vests from the next settlement), anything else burns it;
* **faulted** when any verdict for it is not ``match`` (``mismatch``, ``unverifiable``)
  or the merge tape excluded it for something only the island controls (its update
  never reached the relay, or does not decode: :data:`ISLAND_FAULTS`). The fault is
  recorded in the ledger right after the round settles (the ledger burns a fault only
  against a final round), which also claws back the island's unpaid value from
  earlier rounds;
* **unpaid** otherwise (excluded as a duplicate, a stale update, a norm outlier, or
  not named by the tape at all): it earns nothing this round and keeps what it has.

The epoch is the metagraph epoch at settlement, so a hotkey deregistered meanwhile
stops earning at the next epoch's weights.

An island still in probation (the round is before its ``probation_until_round``,
i.e. within ``audit.probation_rounds`` rounds of admission) has its reward *held*:
the ledger keeps it in escrow and starts its vesting only once probation is over,
so a fault found in any probation round burns all of it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Final

from hypertrain.challenge.errors import UnavailableError
from hypertrain.challenge.state import ServiceState
from hypertrain.dispute.store import disputes_open

log = logging.getLogger(__name__)

# The merge's exclusion reason for an island with a non-``match`` verdict; when every such
# verdict was overturned by a dispute (so none is left in ``verdict_faults``) it is paid.
OVERTURNED_EXCLUSION: Final = "audit_mismatch"
# A hold that only a verdict can lift: the escrow's vesting starts at this round.
PENDING_AUDIT: Final = 2**53 - 1
# Merge-tape exclusion reasons that are the island's own doing, hence faults.
ISLAND_FAULTS: Final = frozenset(
    {
        "missing_blob",
        "hash_mismatch",
        "too_large",
        "wrong_size",
        "wrong_shape",
        "non_finite",
        "malformed",
        "tokens_out_of_range",
        "zero_norm",
    }
)


@dataclass(frozen=True)
class Outcome:
    """What settlement decides for a round's commits."""

    accepted: dict[str, int]  # hotkey -> verified tokens (paid or held)
    pending: frozenset[str]  # accepted hotkeys whose assigned audit has no verdict yet
    faults: dict[str, str]  # hotkey -> reason
    unpaid: dict[str, str] = field(default_factory=dict)  # hotkey -> why it earns nothing


def ready_to_settle(state: ServiceState, run_id: str, index: int, now: int) -> bool:
    """Whether round ``index`` may settle at beacon round ``now``.

    Every condition lives here: the merge tape was accepted (the round is in phase
    ``settle``), the dispute window, which opens at the audit close, has passed, and
    every dispute filed in it is decided.
    """
    row = state.conn.execute(
        "SELECT phase, dispute_deadline_round FROM rounds WHERE run_id = ? AND round = ?",
        (run_id, index),
    ).fetchone()
    if row is None or row["phase"] != "settle":
        return False
    deadline = row["dispute_deadline_round"]
    if deadline is None or now <= int(deadline):
        return False
    return not disputes_open(state.conn, run_id, index)  # every dispute is decided


def _merge_lists(state: ServiceState, run_id: str, index: int) -> tuple[set[str], dict[str, str]]:
    row = state.conn.execute(
        "SELECT body FROM merges WHERE run_id = ? AND round = ?", (run_id, index)
    ).fetchone()
    if row is None:
        return set(), {}
    body = json.loads(row["body"])
    return set(body.get("included") or []), dict(body.get("excluded") or {})


def verdict_faults(state: ServiceState, run_id: str, index: int) -> dict[str, str]:
    """hotkey -> reason for every verdict of the round other than ``match`` (first wins).

    A verdict a dispute overturned is no fault, nor is one re-assigned because its
    auditor was found faulty (another auditor's verdict decides instead).
    """
    out: dict[str, str] = {}
    for row in state.conn.execute(
        "SELECT hotkey, auditor, verdict_id, result FROM verdicts v WHERE run_id = ? AND round = ?"
        " AND result != 'match' AND verdict_id NOT IN (SELECT verdict_id FROM dispute_games"
        " WHERE outcome = 'overturned') AND v.verdict_id NOT IN"
        " (SELECT verdict_id FROM reassigned_verdicts) ORDER BY verdict_id",
        (run_id, index),
    ):
        out.setdefault(
            row["hotkey"], f"{row['result']} verdict {row['verdict_id']} by {row['auditor']}"
        )
    return out


def pending_audits(state: ServiceState, run_id: str, index: int) -> set[str]:
    """Hotkeys with an audit assignment in the round and no (still counting) verdict yet."""
    return {
        row["hotkey"]
        for row in state.conn.execute(
            "SELECT a.hotkey FROM audits a WHERE a.run_id = ? AND a.round = ? AND NOT EXISTS"
            " (SELECT 1 FROM verdicts v WHERE v.run_id = a.run_id AND v.round = a.round"
            " AND v.hotkey = a.hotkey AND v.verdict_id NOT IN"
            " (SELECT verdict_id FROM reassigned_verdicts))",
            (run_id, index),
        )
    }


def outcome(state: ServiceState, run_id: str, index: int) -> Outcome:
    """Decide, for every commit of the round, paid / held / faulted / unpaid."""
    included, excluded = _merge_lists(state, run_id, index)
    faults = verdict_faults(state, run_id, index)
    pending = pending_audits(state, run_id, index)
    accepted: dict[str, int] = {}
    unpaid: dict[str, str] = {}
    for row in state.conn.execute(
        "SELECT hotkey, tokens FROM commits WHERE run_id = ? AND round = ? ORDER BY hotkey",
        (run_id, index),
    ):
        hotkey = row["hotkey"]
        if hotkey in faults:
            continue
        reason = excluded.get(hotkey)
        if reason in ISLAND_FAULTS:
            faults[hotkey] = f"merge excluded the update: {reason}"
        elif hotkey in included or reason == OVERTURNED_EXCLUSION:
            # an exclusion for a verdict that a dispute then overturned: the work was
            # proven honest, only too late for the merge, so it is paid (not merged)
            accepted[hotkey] = int(row["tokens"])
        else:
            unpaid[hotkey] = reason or "not included in the merge"
    return Outcome(accepted, frozenset(pending & set(accepted)), faults, unpaid)


def probation_holds(
    state: ServiceState, run_id: str, index: int, accepted: dict[str, int]
) -> dict[str, int]:
    """hotkey -> release round for the accepted islands still in probation at ``index``."""
    return {
        row["hotkey"]: int(row["probation_until_round"])
        for row in state.conn.execute(
            "SELECT hotkey, probation_until_round FROM roster"
            " WHERE run_id = ? AND probation_until_round > ? ORDER BY hotkey",
            (run_id, index),
        )
        if row["hotkey"] in accepted
    }


def accepted_tokens(state: ServiceState, run_id: str, index: int) -> dict[str, int]:
    """hotkey -> tokens for the round's commits that settlement pays or holds."""
    return outcome(state, run_id, index).accepted


def settle_round(state: ServiceState, run_id: str, index: int) -> dict[str, int]:
    """Settle inside the caller's transaction; marks the round final."""
    snapshot = state.metagraph.snapshot
    if snapshot is None:
        raise UnavailableError("cannot settle: no metagraph snapshot yet", code="no_metagraph")
    result = outcome(state, run_id, index)
    accepted = result.accepted
    held = probation_holds(state, run_id, index, accepted)
    held.update(dict.fromkeys(result.pending, PENDING_AUDIT))
    state.ledger.settle_round(run_id, index, accepted, snapshot.epoch, held=held)
    for hotkey, reason in sorted(result.faults.items()):
        record_fault(state, run_id, index, hotkey, reason, snapshot.epoch)
    state.conn.executemany(
        "INSERT INTO settlements VALUES (?, ?, ?, ?, ?)",
        [(run_id, index, hotkey, tokens, snapshot.epoch) for hotkey, tokens in accepted.items()],
    )
    state.conn.execute(
        "UPDATE rounds SET phase = 'final', settled_epoch = ? WHERE run_id = ? AND round = ?",
        (snapshot.epoch, run_id, index),
    )
    state.count("rounds_settled")
    log.info(
        "settled round %s/%d: %d islands paid (%d held in probation, %d awaiting a verdict),"
        " %d faults, %d unpaid, epoch %d",
        run_id,
        index,
        len(accepted),
        len(held),
        len(result.pending),
        len(result.faults),
        len(result.unpaid),
        snapshot.epoch,
    )
    return accepted


def record_fault(
    state: ServiceState, run_id: str, index: int, hotkey: str, reason: str, epoch: int
) -> None:
    """Burn a faulted island's unpaid value (the adapter ignores one with no history)."""
    state.ledger.record_fault(run_id, index, hotkey, reason, epoch)


def late_verdict(state: ServiceState, run_id: str, index: int, hotkey: str, result: str) -> None:
    """A verdict that arrived after its round settled: it lifts or burns the held reward.

    ``match`` releases the hold (the escrow vests from the next settlement on, or from
    the end of the island's probation if that is later); anything else is a fault.
    """
    snapshot = state.metagraph.snapshot
    epoch = snapshot.epoch if snapshot is not None else 0
    if result != "match":
        record_fault(state, run_id, index, hotkey, f"late {result} verdict", epoch)
        return
    row = state.conn.execute(
        "SELECT probation_until_round FROM roster WHERE run_id = ? AND hotkey = ?",
        (run_id, hotkey),
    ).fetchone()
    probation_end = int(row["probation_until_round"]) if row is not None else 0
    until = probation_end if probation_end > index else 0
    state.ledger.release_hold(run_id, index, hotkey, epoch, until)
