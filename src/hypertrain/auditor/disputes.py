"""The auditor's side of disputes: answer every game against its own verdicts.

The auditor replays from the same verified checkpoint and samples its verdict came
from (:meth:`~hypertrain.auditor.runner.Auditor.island_round`), so its answers are
what its replay computes; a game it does not answer in time, it loses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypertrain.api.errors import ServiceError
from hypertrain.auditor.replay import load_verified_checkpoint
from hypertrain.dispute.game import Game
from hypertrain.evidence.inputs import segment_samples
from hypertrain.evidence.party import SegmentParty
from hypertrain.evidence.respond import take_part
from hypertrain.evidence.verify import verify_assignment
from hypertrain.rolekit import Emit
from hypertrain.trainer.round_config import island_train_config

if TYPE_CHECKING:
    from hypertrain.auditor.runner import Auditor


def party_of(auditor: Auditor, game: Game) -> SegmentParty:
    """The auditor's replay of the disputed segment, from the island's verified checkpoint."""
    detail = auditor.service.round_detail(auditor.manifest.run_id, game.round)
    raw = next(a for a in detail.assignments if a.body.get("hotkey") == game.island)
    island = auditor.island_round(detail, verify_assignment(raw, auditor.manifest))
    config = island_train_config(auditor.manifest, game.round, layout=island.layout)
    if game.segment == 0 and island.start_state is not None:
        start = island.start_state  # leaf 0 is the derived start state, checked on every audit
    else:
        start = load_verified_checkpoint(island, game.segment, auditor.island_blob, config)
    chunk = segment_samples(island.samples, config, game.segment)
    first = game.segment * config.checkpoint_interval
    return SegmentParty(start, config, chunk, first_step=first)


def answer_disputes(auditor: Auditor, parties: dict[str, SegmentParty], emit: Emit) -> int:
    """One pass over the run's undecided disputes against this auditor's verdicts.

    The same pass re-judges what ``/reassigned`` lists (never this auditor's own
    verdicts). Losing a game of its own does not stop it: only the service's refusal of
    its verdicts (``faulty_auditor``) does, so two auditors that each lost one game still
    re-judge each other's audits.
    """
    return answer_games(auditor, parties, emit) + rejudge(auditor, emit)


def answer_games(auditor: Auditor, parties: dict[str, SegmentParty], emit: Emit) -> int:
    """Send this auditor's due message in every undecided game against its verdicts.

    It never waits on an island (the replay starts from checkpoints the island already
    published), so the audit loop calls it between assignments and while waiting for
    an upload (:attr:`~hypertrain.auditor.runner.Auditor.attend`).
    """
    sent = 0
    for view in auditor.service.disputes(auditor.manifest.run_id):
        if view.auditor != auditor.key.ss58_address or view.game.stage == "decided":
            continue
        sent += take_part(
            auditor.service,
            auditor.key,
            view,
            parties,
            lambda game: party_of(auditor, game),
            expiry_margin=auditor.expiry_margin,
            emit=emit,
        )
    return sent


def rejudge(auditor: Auditor, emit: Emit) -> int:
    """Judge and post each re-assigned audit this auditor has not judged yet."""
    me, posted = auditor.key.ss58_address, 0
    for item in auditor.service.reassigned(auditor.manifest.run_id):
        if item.auditor == me:
            continue
        try:
            detail = auditor.service.round_detail(auditor.manifest.run_id, item.round)
            if any(
                v.envelope.signer == me and v.envelope.body.get("hotkey") == item.hotkey
                for v in detail.verdicts
            ):
                continue  # already judged by this auditor; the service counts that verdict
            assignment = verify_assignment(item.assignment, auditor.manifest)
            outcome = auditor.judge(detail, assignment)
            auditor.post(assignment, outcome)
        except ServiceError as exc:
            emit("error", round=item.round, assignment=item.hotkey, detail=f"{exc}"[:500])
            if exc.code == "faulty_auditor":
                return posted  # this auditor's verdicts no longer count in the run
            continue
        except Exception as exc:  # one re-assigned audit never stops the others
            emit("error", round=item.round, assignment=item.hotkey, detail=f"{exc}"[:500])
            continue
        emit(
            "verdict",
            round=item.round,
            hotkey=item.hotkey,
            result=outcome.result,
            reassigned_from=item.auditor,
        )
        posted += 1
    return posted
