"""``hypertrain referee serve``: rule on every contested operation of a run.

The referee polls the service for games at the ``referee`` stage whose inputs were
supplied, fetches the input bytes, recomputes the one operation
(:func:`~hypertrain.referee.recompute.recompute`) and signs the output digests it got
with its own key, which the run manifest must list in ``dispute.referees``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from hypertrain.api.client import ChallengeClient
from hypertrain.api.disputes import DisputeRuled
from hypertrain.api.errors import ServiceError
from hypertrain.dispute.errors import DisputeError
from hypertrain.dispute.game import Game
from hypertrain.dispute.messages import DisputeRuling
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.referee.recompute import recompute
from hypertrain.rolekit import Emit, poll, role_events

emit_json = role_events("referee")


@dataclass(frozen=True, slots=True)
class Referee:
    service: ChallengeClient
    key: Hotkey
    run_id: str
    expiry_margin: int = 50

    def rule(self, game: Game, emit: Emit = emit_json) -> DisputeRuled:
        """Recompute ``game``'s contested operation and post the signed ruling."""
        assert game.op is not None and game.inputs_sha256 is not None
        data = self.service.dispute_inputs(game.dispute_id)
        t0 = time.perf_counter()
        outputs = recompute(game.op, data)
        seconds = time.perf_counter() - t0
        body = DisputeRuling(
            dispute_id=game.dispute_id,
            query=game.query,
            inputs_sha256=game.inputs_sha256,
            outputs=outputs,
        )
        env = seal(
            self.key,
            domain="dispute-ruling",
            run_id=self.run_id,
            body=body.model_dump(mode="json"),
            expiry_round=self.service.beacon_round() + self.expiry_margin,
        )
        answer = self.service.dispute_ruling(game.dispute_id, env)
        emit(
            "ruling",
            dispute_id=game.dispute_id[:16],
            op=game.op.op,
            seconds=round(seconds, 6),
            outcome=answer.game.outcome,
        )
        return answer


def rule_pending(referee: Referee, emit: Emit = emit_json) -> int:
    """One pass: rule on every game waiting for a referee; returns how many were ruled."""
    ruled = 0
    for view in referee.service.disputes(referee.run_id, stage="referee"):
        game = view.game
        if game.inputs_sha256 is None:
            continue
        try:
            referee.rule(game, emit)
            ruled += 1
        except (DisputeError, ServiceError) as exc:
            emit("error", dispute_id=game.dispute_id[:16], detail=str(exc)[:300])
    return ruled


def serve(
    referee: Referee,
    *,
    poll_s: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
    emit: Emit = emit_json,
) -> None:
    """Rule on what waits, every ``poll_s``, until ``stop``; a failed pass is an event."""
    poll(
        lambda: rule_pending(referee, emit),
        poll_s=poll_s,
        stop=stop,
        passing=(ServiceError, OSError),
        on_error=lambda exc, _: emit("error", detail=str(exc)[:300]),
    )
