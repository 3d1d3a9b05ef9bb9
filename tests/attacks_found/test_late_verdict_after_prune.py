"""A late mismatch arrives after the honest miner pruned its checkpoints: it cannot defend.

docs/challenge-routes.md: a verdict is accepted after the audit window "for an assignment that
has no verdict yet (its reward is held until then)"; docs/mechanism.md (Disputes): such a late
verdict gets "a full window of its own" and the island disputes when "its own replay of the
segment reproduces its committed leaf". docs/miner.md (watch): "It keeps a round's checkpoints
until the round is final, its dispute window has closed and every dispute of it is decided;
then it deletes them, all but the last".

The miner's rule (``prunable``) looks at the round's own dispute deadline only, not at an
assignment of the island still waiting for its verdict. So an auditor that skips one island's
audit (its reward is held) waits until the round is final and past its dispute deadline: the
honest miner deletes the round's checkpoints. Then the auditor posts ``mismatch``. The service
accepts it and opens its own dispute window, but the island can no longer replay the segment
(its start checkpoint is gone), so ``watch --follow`` never disputes and the lie becomes a
fault that burns everything it has.

The service is the real one over HTTP; the miner's pruning decision is its real
``prunable`` / ``prune_round``, fed the service's own round summary.
"""

from __future__ import annotations

from pathlib import Path

from hypertrain.api.client import ChallengeClient
from hypertrain.miner.disputes import prunable, prune_round
from tests.challenge.dispute_scenario import (
    AUDITOR,
    ISLANDS,
    RUN,
    Service,
    assignment,
    commit_round_0,
    merge,
    post_verdict,
    send_verdict,
    service,
)
from tests.challenge.helpers import TOKENS

__all__ = ["service"]  # the fixture, by name


def test_the_miner_keeps_its_checkpoints_while_a_verdict_on_it_can_still_arrive(
    service: Service, tmp_path: Path
) -> None:
    victim, other = ISLANDS
    commit_round_0(service)
    mine = assignment(service, victim)  # the auditor "skips" the victim's assignment
    r = post_verdict(service, AUDITOR, other, "match", update_checked=True)
    assert r.status_code == 200, r.text
    service.tick(30)
    merge(service, 0, pending=True)
    service.tick(20)  # final, past the round's dispute deadline
    workdir = tmp_path / "round-0"
    workdir.mkdir()
    for i in range(5):  # the victim's checkpoints of round 0
        (workdir / f"ckpt_{i}.bin").write_bytes(b"x")
    client = ChallengeClient(
        "http://testserver", worker_token=TOKENS["worker"], http=service.client
    )
    summary = next(s for s in client.rounds(RUN) if s.round == 0)
    now = client.beacon_round()
    if prunable(summary.phase, summary.dispute_deadline_round, now, undecided=False):
        prune_round(workdir)  # what watch --follow does on this pass
    late = {**mine, "result": "mismatch", "first_bad_leaf": mine["segments"][0] + 1}
    late.pop("selection_beacon_round")
    posted = send_verdict(service, AUDITOR, late)
    assert posted.status_code == 200, posted.text  # accepted, with a dispute window of its own
    segment = mine["segments"][0]
    needed = workdir / f"ckpt_{segment}.bin"  # the start of the judged segment
    assert needed.exists() or segment == 0, (
        f"round 0 was pruned (phase {summary.phase}, dispute deadline"
        f" {summary.dispute_deadline_round}, now {now}) while the victim's audit had no verdict;"
        f" the late mismatch on segment {segment} was then accepted and the miner no longer holds"
        " the checkpoint it needs to replay and dispute it:"
        f" {sorted(p.name for p in workdir.iterdir())}"
    )
