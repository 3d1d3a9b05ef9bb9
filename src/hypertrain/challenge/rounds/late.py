"""Late verdicts on a missed assignment obey the audit phase's majority rule.

An assignment with no judging verdict when its audit phase ended (missed, or its
verdicts set aside for a re-audit) takes late verdicts: the first one opens its *late
panel* (:func:`admit`), which fixes the jury (the run's auditors less the island and the
auditors whose verdicts on it were set aside,
:func:`~hypertrain.challenge.facts.jury.jury`) and a window of
``round.audit_window_rounds`` beacon rounds in which every juror may post its verdict.
A split assignment (its judges' verdicts hold no majority either way,
:func:`~hypertrain.challenge.rule.jury_standing`) takes late verdicts the same way.
The late verdicts count only once a strict majority of that jury judged it
(:func:`~hypertrain.challenge.rule.late_standing`); until then the island is held,
and a window that closes short of the majority leaves it held (fail closed, never paid
on one word, never burned on none). A re-audit of an undecided ``recompute`` dispute is
taken for the dispute's own bound. With no auditor set known (no listed worker keys) the
jury is empty and the first verdict decides (only a referee could say more).
"""

from __future__ import annotations

from hypertrain.challenge import facts
from hypertrain.challenge.errors import ForbiddenError
from hypertrain.challenge.facts import jury
from hypertrain.challenge.settlement.settle import release_later
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.store import (
    game_storage,
    late_panel_storage,
    reaudit_storage,
    verdict_storage,
    window_storage,
)


def accepts(state: ServiceState, run_id: str, index: int, hotkey: str, signer: str) -> bool:
    """Whether the round (past its audit phase) takes ``signer``'s verdict on ``hotkey``.

    Refuses a key outside an open panel's jury (``not_juror``, 403).
    """
    conn, now = state.conn, state.due_round()
    if any(g.stage == "recompute" for g in game_storage.games_on(conn, run_id, index, hotkey)):
        return True  # the dispute's quorum is gathered within its own bound
    if hotkey not in facts.undecided(conn, run_id, index):
        return False
    panel = late_panel_storage.late_panel(conn, run_id, index, hotkey)
    if panel is None:
        return True
    if now > panel.close_round:
        return False
    if panel.jury and signer not in panel.jury:
        raise ForbiddenError(
            f"{signer} is not on the late jury of {hotkey}'s round {index}", code="not_juror"
        )
    return True


def admit(state: ServiceState, run_id: str, index: int, hotkey: str) -> None:
    """Open the assignment's late panel if none is open (inside the caller's transaction)."""
    conn, now = state.conn, state.due_round()
    if late_panel_storage.late_panel(conn, run_id, index, hotkey) is not None:
        return
    aside = {
        x.auditor for x in reaudit_storage.set_aside_verdicts(conn, run_id) if x.round == index
    }
    aside &= {v.auditor for v in verdict_storage.verdicts_on(conn, run_id, index, hotkey)}
    window = state.manifest(run_id).round.audit_window_rounds
    late_panel_storage.open_late_panel(
        conn,
        run_id,
        late_panel_storage.LatePanelRow(
            round=index,
            hotkey=hotkey,
            opened_beacon_round=now,
            close_round=now + window,
            jury=jury.jury(state.conn, state.settings, run_id, {hotkey, *aside}),
        ),
    )


def decided(state: ServiceState, run_id: str, index: int, hotkey: str, final: bool) -> None:
    """After a late verdict: once the majority judged the assignment, apply its standing.

    A fault among the counting verdicts of a final round gets its own dispute window (its
    fault is booked when the window closes undisputed); no fault releases the holds
    (:func:`~hypertrain.challenge.settlement.settle.release_later`). Inside the caller's
    transaction; a final round with no metagraph snapshot refuses the verdict.
    """
    conn = state.conn
    if final:  # with no epoch to book at, refuse it (the auditor posts it again)
        state.epoch_now("book a late verdict")
    if hotkey in facts.undecided(conn, run_id, index):
        return  # still short of the late majority, or split: the island stays held
    counted = [
        v
        for v in facts.standing_verdicts(conn, run_id, index)
        if v.hotkey == hotkey and v.judged and v.standing == "stands"
    ]
    faults = [v for v in counted if v.result != "match"]
    if faults and final:
        now = state.due_round()
        deadline = now + state.manifest(run_id).round.dispute_window_rounds
        for received in sorted({v.received for v in faults}):
            for verdict in verdict_storage.fault_verdicts_received(
                conn, run_id, index, hotkey, received
            ):
                window_storage.open_window(conn, verdict, deadline, books_fault=True)
    if not faults:  # on a final round the reward was held for this verdict: released here
        release_later(state.books(), run_id, index, hotkey)
