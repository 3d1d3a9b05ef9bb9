"""Leaving a run: a signed ``leave`` takes an island off the roster from the next round.

The rule (docs/mechanism.md, "Leaving"):

* The island stays in every round already opened (their round-open records are signed
  and fixed): a commit it made there is audited, disputed and settled as any other, so
  leaving cannot dodge a pending audit. It is left out of every round opened after the
  leave (``left_round``, the index of the next round at the time of the leave).
* Its roster row stays: the ledger keeps its escrow vesting on the run's schedule, a
  fault proven later for any of its rounds (a late verdict, an upheld dispute) burns
  its unvested and vested-unpaid value as for any island, and deregistration still
  burns what is unpaid.
* A leave is final for the run: a second leave is ``already_left`` and a join after it
  is ``left`` (both 409); the envelope's nonce makes a replayed leave ``replayed``.
"""

from __future__ import annotations

import hashlib
import sqlite3

from hypertrain.api.models import LeaveAnswer
from hypertrain.challenge.errors import ConflictError, NotFoundError
from hypertrain.challenge.facts.progress import next_round
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.store import roster_storage
from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.messages import Leave
from hypertrain.protocol.sqlite import transaction


def leave(state: ServiceState, env: Envelope) -> LeaveAnswer:
    """Record an island's signed leave; it trains no round opened from now on."""
    verified, _body = state.open_signed(env, "leave", Leave, registered=True)
    run_id, hotkey = env.run_id, verified.signer
    member = roster_storage.membership(state.conn, run_id, hotkey)
    if member is None:
        raise NotFoundError(f"{hotkey} is not in the roster of {run_id}", code="not_in_roster")
    if member.left_round is not None:
        raise ConflictError(
            f"{hotkey} already left {run_id} from round {member.left_round}", code="already_left"
        )
    left_round = next_round(state.conn, run_id)
    raw = env.to_bytes()
    with transaction(state.conn):
        state.burn(env)
        roster_storage.record_leave(state.conn, run_id, hotkey, left_round, raw.decode("utf-8"))
    state.count("leaves")
    return LeaveAnswer(
        run_id=run_id,
        hotkey=hotkey,
        left_round=left_round,
        leave_id=hashlib.sha256(raw).hexdigest(),
    )


def refuse_rejoin(conn: sqlite3.Connection, run_id: str, hotkey: str) -> None:
    """A join after a leave is refused: leaving is final for the run."""
    member = roster_storage.membership(conn, run_id, hotkey)
    if member is not None and member.left_round is not None:
        raise ConflictError(
            f"{hotkey} left {run_id} from round {member.left_round}; a leave is final",
            code="left",
        )
