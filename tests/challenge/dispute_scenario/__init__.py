"""The dispute scenario: the run every dispute test plays on the real service, and its builders.

The challenge service runs in process (FastAPI's ``TestClient``) on a beacon the test steps
by hand (:class:`~tests.challenge.helpers.SteppedBeacon`) and a ledger fake that records what
settlement pays, holds, burns and bonds. Run :data:`RUN` has two islands (:data:`ISLANDS`)
that commit the checkpoint tree of :mod:`tests.challenge.disputeplay`, auditors that sign
verdicts (:data:`AUDITOR`, :data:`OTHER_AUDITOR`, :data:`THIRD_AUDITOR`), a referee and the
aggregator of :mod:`tests.challenge.helpers`, which signs the merge tapes.

The builders, bottom-up, one module each:

* ``cast``: the run, its keys, the honeypot list and the dispute rules;
* ``runs``: a service: :func:`started` (any manifest), :func:`joined_run` (islands joined),
  :func:`dispute_run` (the ``service`` and ``bonded`` fixtures' run: a referee and the
  honeypot list), :func:`rules_run` (listed auditors, the rules of :data:`RULES`) and
  :func:`jury_run` (the same with the aggregator listed and named);
* ``rounds``: round 0 (:func:`commit_round_0`, then :func:`to_verdict`: island 0 judged a
  mismatch, or :func:`verdict_of_check`: a mismatch of one check), later rounds
  (:func:`open_round`, :func:`open_and_commit`) and verdicts (:func:`assignment`,
  :func:`post_verdict`, :func:`verdict_on`, :func:`judge`);
* ``games``: disputes: :func:`open_dispute`, :func:`lose_by_silence`,
  :func:`played_to_referee`, :func:`play_against_a_liar`;
* ``merges``: :func:`tape`, :func:`post_tape`, :func:`merge_round_0`,
  :func:`merge_and_settle`, :func:`merge`;
* ``witnesses``: tape witnesses: :func:`witnessed_run`, :func:`merged` (round 0 merged) and
  :func:`attest`;
* ``evidence``: an honest island's evidence at a real relay on loopback (the ``relay``
  fixture, :func:`serve_evidence`) and a lie about it (:func:`round_0_with_a_lie`);
* ``auditor``: an auditor over the service whose replay is stood in for:
  :class:`ReplayStandIn`.

A test module imports what it uses from this package and takes the fixtures it uses by
importing them (``service``, ``bonded``, ``three``, and ``relay`` with the relay tests'
``clock``, ``keys`` and ``serve`` it stands on).
"""

from __future__ import annotations

from tests.challenge.dispute_scenario.auditor import ReplayStandIn, stand_in_auditor
from tests.challenge.dispute_scenario.cast import (
    AUDITOR,
    BOUND,
    CLOCK_ROUNDS,
    HONEYPOTS,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREE,
    REFEREE_EXTENSIONS,
    REFEREE_ROUNDS,
    REFEREED,
    RULES,
    RUN,
    THIRD_AUDITOR,
    WINDOW,
    addresses,
)
from tests.challenge.dispute_scenario.evidence import (
    HONEST,
    LIAR,
    WITHHELD,
    relay,
    round_0_with_a_lie,
    serve_evidence,
)
from tests.challenge.dispute_scenario.games import (
    liar_answer,
    lose_by_silence,
    open_dispute,
    play_against_a_liar,
    played_to_referee,
)
from tests.challenge.dispute_scenario.merges import (
    merge,
    merge_and_settle,
    merge_round_0,
    post_tape,
    split_tape,
    tape,
)
from tests.challenge.dispute_scenario.rounds import (
    assignment,
    barred,
    commit_round_0,
    judge,
    open_and_commit,
    open_round,
    post_verdict,
    round_detail,
    send_verdict,
    to_verdict,
    verdict_body,
    verdict_of_check,
    verdict_on,
)
from tests.challenge.dispute_scenario.runs import (
    Played,
    Service,
    bonded,
    carry_doc,
    dispute_doc,
    dispute_run,
    joined_run,
    jury_run,
    rules_run,
    running,
    service,
    started,
    three,
)
from tests.challenge.dispute_scenario.witnesses import (
    DIFF,
    SECOND,
    TAPE_SIGNER,
    WITNESS,
    WITNESS_WAIT,
    attest,
    merged,
    witnessed_run,
)
from tests.relay.conftest import clock, keys, serve

__all__ = [
    "AUDITOR",
    "BOUND",
    "CLOCK_ROUNDS",
    "DIFF",
    "HONEST",
    "HONEYPOTS",
    "ISLANDS",
    "LIAR",
    "OTHER_AUDITOR",
    "REFEREE",
    "REFEREED",
    "REFEREE_EXTENSIONS",
    "REFEREE_ROUNDS",
    "RULES",
    "RUN",
    "SECOND",
    "TAPE_SIGNER",
    "THIRD_AUDITOR",
    "WINDOW",
    "WITHHELD",
    "WITNESS",
    "WITNESS_WAIT",
    "Played",
    "ReplayStandIn",
    "Service",
    "addresses",
    "assignment",
    "attest",
    "barred",
    "bonded",
    "carry_doc",
    "clock",
    "commit_round_0",
    "dispute_doc",
    "dispute_run",
    "joined_run",
    "judge",
    "jury_run",
    "keys",
    "liar_answer",
    "lose_by_silence",
    "merge",
    "merge_and_settle",
    "merge_round_0",
    "merged",
    "open_and_commit",
    "open_dispute",
    "open_round",
    "play_against_a_liar",
    "played_to_referee",
    "post_tape",
    "post_verdict",
    "relay",
    "round_0_with_a_lie",
    "round_detail",
    "rules_run",
    "running",
    "send_verdict",
    "serve",
    "serve_evidence",
    "service",
    "split_tape",
    "stand_in_auditor",
    "started",
    "tape",
    "three",
    "to_verdict",
    "verdict_body",
    "verdict_of_check",
    "verdict_on",
    "witnessed_run",
]
