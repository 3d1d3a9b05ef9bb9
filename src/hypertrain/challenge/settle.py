"""Final settlement of a round: which commits earn, and the ledger call that pays them.

An island earns for a round when it committed and no auditor returned a mismatch
for it; its weight is its committed token count. A mismatch is recorded as a fault
in the ledger right after the round settles (the ledger burns a fault only against
a final round), which also claws back the island's unpaid value from earlier
rounds. The ledger turns the accepted tokens into escrow, vesting and burns. The
epoch is the metagraph epoch at settlement, so a hotkey deregistered meanwhile
stops earning at the next epoch's weights.

An island still in probation (the round is before its ``probation_until_round``,
i.e. within ``audit.probation_rounds`` rounds of admission) has its reward *held*:
the ledger keeps it in escrow and starts its vesting only once probation is over,
so a fault found in any probation round burns all of it.
"""

from __future__ import annotations

import logging

from hypertrain.challenge.errors import UnavailableError
from hypertrain.challenge.state import ServiceState

log = logging.getLogger(__name__)


def accepted_tokens(state: ServiceState, run_id: str, index: int) -> dict[str, int]:
    """hotkey -> tokens for the round's commits without a mismatch verdict."""
    faulty = {
        row["hotkey"]
        for row in state.conn.execute(
            "SELECT hotkey FROM verdicts WHERE run_id = ? AND round = ? AND result = 'mismatch'"
            " AND verdict_id NOT IN (SELECT verdict_id FROM dispute_games"
            " WHERE outcome = 'overturned')",  # an overturned verdict is no fault
            (run_id, index),
        )
    }
    return {
        row["hotkey"]: int(row["tokens"])
        for row in state.conn.execute(
            "SELECT hotkey, tokens FROM commits WHERE run_id = ? AND round = ? ORDER BY hotkey",
            (run_id, index),
        )
        if row["hotkey"] not in faulty
    }


def _faults(state: ServiceState, run_id: str, index: int) -> dict[str, str]:
    """hotkey -> reason for every mismatch verdict of the round (first one wins)."""
    out: dict[str, str] = {}
    for row in state.conn.execute(
        "SELECT hotkey, auditor, verdict_id FROM verdicts WHERE run_id = ? AND round = ?"
        " AND result = 'mismatch' AND verdict_id NOT IN (SELECT verdict_id FROM dispute_games"
        " WHERE outcome = 'overturned') ORDER BY verdict_id",
        (run_id, index),
    ):
        out.setdefault(row["hotkey"], f"mismatch verdict {row['verdict_id']} by {row['auditor']}")
    return out


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


def settle_round(state: ServiceState, run_id: str, index: int) -> dict[str, int]:
    """Settle inside the caller's transaction; marks the round final."""
    snapshot = state.metagraph.snapshot
    if snapshot is None:
        raise UnavailableError("cannot settle: no metagraph snapshot yet", code="no_metagraph")
    accepted = accepted_tokens(state, run_id, index)
    held = probation_holds(state, run_id, index, accepted)
    state.ledger.settle_round(run_id, index, accepted, snapshot.epoch, held=held)
    for hotkey, reason in _faults(state, run_id, index).items():
        state.ledger.record_fault(run_id, index, hotkey, reason, snapshot.epoch)
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
        "settled round %s/%d: %d islands paid (%d held in probation), epoch %d",
        run_id,
        index,
        len(accepted),
        len(held),
        snapshot.epoch,
    )
    return accepted
