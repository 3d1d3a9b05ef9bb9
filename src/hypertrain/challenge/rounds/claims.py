"""Intake checks that a signed claim agrees with the service's own facts.

Two claims are checked here before anything is stored:

* a ``mismatch`` verdict must be a disputable claim about its assignment
  (:func:`check_mismatch`): it names the check that failed first and a leaf consistent
  with that check and the audited segments, exactly what
  :func:`hypertrain.dispute.admissible.disputed_check` lets a dispute contest, so every
  accepted mismatch can be disputed by its island;
* a merge tape may not include an island the service's facts say must not be merged
  (:func:`check_tape`): one with a standing fault verdict for the round, or one whose
  assigned audit has no verdict (the aggregator excludes both, as ``audit_mismatch``
  and ``audit_pending``, so an honest tape is never refused).

Who may sign a claim at all (one key, one role in a run) is decided apart, in
:mod:`hypertrain.challenge.facts.roles`.
"""

from __future__ import annotations

import sqlite3

from hypertrain.challenge import facts
from hypertrain.challenge.errors import ChallengeError
from hypertrain.dispute.admissible import Check
from hypertrain.protocol.messages import MergeTape, Verdict


class UndisputableVerdictError(ChallengeError):
    """A mismatch verdict that names no check a dispute could contest."""

    code = "undisputable_verdict"


class UnverifiedMergeError(ChallengeError):
    """A merge tape that includes an island the service's facts exclude from the merge."""

    status = 409
    code = "unverified_merge"


def resolved_check(body: Verdict, num_segments: int) -> Check:
    """The check a mismatch names, read as disputes read it when ``check`` is absent."""
    leaf = body.first_bad_leaf
    if body.check is not None:
        return body.check
    if leaf == 0:
        return "start"
    if leaf == num_segments and body.update_checked:
        return "update"
    return "segment"


def check_mismatch(body: Verdict, num_segments: int) -> None:
    """Refuse a mismatch whose ``check`` / ``first_bad_leaf`` names nothing disputable.

    ``start`` is leaf 0; ``segment`` is the end leaf of an audited segment; ``update``
    is the final leaf of an audit that replayed the final segment (``update_checked``).
    """
    if body.result != "mismatch":
        return
    leaf = body.first_bad_leaf
    if leaf is None:
        raise UndisputableVerdictError("a mismatch verdict must name its first_bad_leaf")
    if leaf > num_segments:
        raise UndisputableVerdictError(
            f"first_bad_leaf {leaf} is past the tree's last leaf {num_segments}"
        )
    check = resolved_check(body, num_segments)
    last = num_segments - 1
    if check == "start" and leaf != 0:
        raise UndisputableVerdictError(f"a start check fails at leaf 0, not {leaf}")
    if check == "segment" and (leaf == 0 or leaf - 1 not in body.segments):
        raise UndisputableVerdictError(
            f"leaf {leaf} is not the end leaf of an audited segment {sorted(body.segments)}"
        )
    if check == "update" and (
        leaf != num_segments or last not in body.segments or not body.update_checked
    ):
        raise UndisputableVerdictError(
            f"an update check fails at leaf {num_segments} of an audit that replayed"
            f" segment {last} and checked the update"
        )


def check_tape(conn: sqlite3.Connection, run_id: str, tape: MergeTape) -> None:
    """Refuse a tape whose ``included`` names a faulted or unjudged island of its round.

    Unjudged is read as the aggregator reads the public round record: an assigned audit
    with no verdict at all. (An island whose only verdict was set aside may be included;
    settlement holds its reward until another verdict judges it.)
    """
    inputs = facts.round_inputs(conn, run_id, tape.round)
    faulted = {v.hotkey for v in inputs.verdicts if v.fault}
    pending = inputs.assigned - {v.hotkey for v in inputs.verdicts}
    for hotkey in sorted(tape.included):
        if hotkey in faulted:
            raise UnverifiedMergeError(
                f"the tape includes {hotkey}, whose standing verdict for round"
                f" {tape.round} is a fault"
            )
        if hotkey in pending:
            raise UnverifiedMergeError(
                f"the tape includes {hotkey}, whose assigned audit in round {tape.round}"
                " has no verdict"
            )
