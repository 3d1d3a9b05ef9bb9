"""The model a new round opens on, where tape witnesses are required.

With ``HYPERTRAIN_TAPE_WITNESSES`` > 0 no island trains on a model the witnesses did
not clear. Round ``r + 1`` opens on round ``r``'s merged model only once round ``r``'s
current tape is witnessed and is a link of the current chain (not a tape merged on a
model a correction has since superseded, which waits for its own correction); while
it is not, no round opens, for at most ``HYPERTRAIN_WITNESS_WAIT_ROUNDS`` beacon rounds
after the tape arrived, or after a correction citing a new proven fault arrived
(:func:`~hypertrain.challenge.settlement.rollbacks.wait_start`: a correction restarts its
round's wait, once per proven fault). After that the next round opens on the model
round ``r`` continues on the current chain (its merge is left out of the chain; its
pay still waits for the witnesses): its corrected start where a correction moved it,
never a start model a correction superseded
(:func:`~hypertrain.challenge.settlement.rollbacks.continued_model`, over the one chain
definition :func:`~hypertrain.challenge.settlement.rollbacks.predecessor_models` that the
correction checks and the aggregator's and witness's ``previous_outer`` also follow).
The step is the pure rule :func:`~hypertrain.challenge.tape_rule.chain_step`; this
module reads its inputs, all from the database, so a restarted service gives the same
answers. Without witnesses the next round continues from the round's current tape, as
before.
"""

from __future__ import annotations

from hypertrain.challenge.errors import ChallengeError, PhaseError
from hypertrain.challenge.settlement import rollbacks, witness
from hypertrain.challenge.state import ServiceState
from hypertrain.challenge.tape_rule import ChainStep, TapeVerdict, chain_step


def step(state: ServiceState, run_id: str, index: int, now: int) -> ChainStep:
    """What the round after ``index`` may open on at beacon round ``now``."""
    tape = rollbacks.current_tape(state.conn, run_id, index)
    until = None if tape is None else witness.wait_until(state.conn, state.settings, run_id, index)
    verdict = witness.status(state.conn, state.settings, state.due_round, run_id, index)
    if not rollbacks.on_chain(state.conn, run_id, index):  # merged on a superseded model:
        verdict = TapeVerdict("awaiting", verdict.agreeing)  # it awaits its correction
    return chain_step(verdict, now, until)


def next_start(state: ServiceState, run_id: str, index: int, now: int) -> tuple[str, str] | None:
    """The model round ``index`` must open on (None: round 0, or no witness required
    and nothing merged before it); :class:`PhaseError` ``unwitnessed`` while it waits."""
    if index == 0:
        return None
    prev = index - 1
    tape = rollbacks.current_tape(state.conn, run_id, prev)
    if state.settings.tape_witnesses <= 0:
        return None if tape is None else (tape.new_model_sha256, tape.new_model_url)
    found = step(state, run_id, prev, now)
    if found == "wait":
        raise PhaseError(
            f"round {prev} of {run_id}: its tape is not witnessed yet; the next round opens"
            f" on its model once it is, or on the model it continues after the witness wait",
            code="unwitnessed",
        )
    if found == "merged" and tape is not None:
        return tape.new_model_sha256, tape.new_model_url
    return rollbacks.continued_model(state.conn, run_id, prev)


def check_start(state: ServiceState, run_id: str, index: int, sha: str, now: int) -> None:
    """With witnesses required, a start model the operator names must be the chain's."""
    expected = next_start(state, run_id, index, now)
    if state.settings.tape_witnesses > 0 and expected is not None and sha != expected[0]:
        raise ChallengeError(
            f"round {index} of {run_id} must open on {expected[0][:16]}…, the last model"
            f" the tape witnesses cleared, not {sha[:16]}…",
            code="unwitnessed_model",
        )
