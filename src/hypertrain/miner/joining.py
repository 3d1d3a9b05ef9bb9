"""``hypertrain-miner join``: the join request, the admission challenge and its retries.

Under the admission challenge an answer that reaches the service after its deadline
refuses that one challenge. The deadline is part of what admission proves (a slow machine
must not pass as a fast one), so it is never stretched here: ``join`` says the answer was
late (event ``admission_late``) and asks again for a fresh challenge, whose seed comes
from a beacon round after the new request, so nothing of an earlier answer can be reused.
It first waits out the service's backoff (the rounds a refused hotkey waits, doubled at
each refusal; event ``admission_backoff``), at most ``join_attempts`` challenges in all;
then :class:`AdmissionLateError` names the deadlines and the attempts. A refusal for any
other reason (a hash or a memory answer that differs from the worker's) is final and is
not retried. A retry reads nothing from and writes nothing to the state directory, and
signs with the same key.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Final

import torch

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import AdmissionStatus, JoinAnswer
from hypertrain.miner.admission import local_devices, one_challenge, selfcheck
from hypertrain.miner.config import MinerConfig, config_from_args
from hypertrain.miner.context import load_run
from hypertrain.miner.errors import ConfigError, MinerError
from hypertrain.miner.report import Reporter
from hypertrain.miner.standing import admission_line
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.memproof import claim_for, memory_floor
from hypertrain.protocol.messages import JoinRequest

# The longest wait for the service's backoff between two attempts (the fourth refusal's
# backoff, 160 rounds at the default 20, is 8 minutes on quicknet's 3 s rounds).
MAX_BACKOFF_WAIT_S: Final = 3600.0


class AdmissionLateError(MinerError):
    """Each of the island's ``attempts`` admission answers reached the service after its
    deadline (``deadline_rounds``, one per attempt)."""

    def __init__(self, late: list[AdmissionStatus]) -> None:
        self.attempts = len(late)
        self.deadline_rounds = [s.answer_deadline_round for s in late]
        rounds = ", ".join(str(r) for r in self.deadline_rounds)
        super().__init__(
            f"admission failed: the answer was late in all {self.attempts} attempt(s), each"
            f" refused after its answer deadline (beacon round(s) {rounds}); last refusal:"
            f" {late[-1].reason or 'late'}. This machine did not compute the challenge within"
            " its device class's window: run join again when it is less loaded, or give more"
            " attempts (--join-attempts)"
        )


def join_layout(manifest: RunManifest, cfg: MinerConfig, devices: int) -> LayoutSpec:
    """One rank per device (or ``cfg.ranks``), ``cfg.micro_batches`` per rank (or the run's),
    the run's micro-batch size, ``cfg.ep`` and ``cfg.zero1``; refused here already when
    outside the run's limits."""
    default = manifest.round.layout
    try:
        layout = LayoutSpec(
            dp_ranks=cfg.ranks or devices,
            micro_batches=cfg.micro_batches or default.micro_batches,
            micro_batch_size=default.micro_batch_size,
            ep=cfg.ep,
            zero1=bool(cfg.zero1),
        )
    except ValueError as exc:
        raise ConfigError(f"bad layout: {exc}") from exc
    problem = manifest.layout_problem(layout)
    if problem is not None:
        raise ConfigError(f"layout outside the run's limits: {problem}")
    return layout


def join_cmd(args: argparse.Namespace) -> int:
    """Join the run; 0 once admitted, 1 when a challenge was refused (or undecided)."""
    cfg = config_from_args(args)
    key = cfg.load_key()
    with ChallengeClient(cfg.service_url) as service:
        ctx = load_run(cfg, service, check=False)
        local = local_devices()
        layout = join_layout(ctx.manifest, cfg, len(local))
        # claim (and prove) what the layout needs per device, in whole MiB that prove it
        claim = claim_for(memory_floor(ctx.manifest, layout))
        body = JoinRequest(
            devices=selfcheck(local, claim_bytes=claim),
            layout=layout,
            endpoint=cfg.endpoint or None,
            region=cfg.region or None,
        )
        if not join_run(service, key, cfg, body, Reporter("miner"), devices=local):
            return 1
        entry = next((r for r in service.roster(cfg.run_id) if r.hotkey == key.ss58_address), None)
        sys.stdout.write(admission_line(ctx.manifest, layout, entry, key.ss58_address))
    return 0


def join_run(
    service: ChallengeClient,
    key: Hotkey,
    cfg: MinerConfig,
    body: JoinRequest,
    reporter: Reporter,
    *,
    devices: list[torch.device] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Send the join and answer its challenge, joining again after a late answer.

    Returns True once admitted, False when a challenge was refused for another reason
    than lateness or was not decided in time; raises :class:`AdmissionLateError` when all
    ``cfg.join_attempts`` answers were late. ``sleep`` is the wait between two polls."""
    late: list[AdmissionStatus] = []
    for attempt in range(1, cfg.join_attempts + 1):
        answer = _send_join(
            service, key, cfg, body, reporter, after_refusal=bool(late), sleep=sleep
        )
        _print(answer)
        if answer.challenge is None:  # the run admits on the self-reported workload
            return answer.admitted
        outcome = one_challenge(
            service,
            key,
            cfg.run_id,
            devices=devices,
            poll_s=cfg.poll_s,
            expiry_margin=cfg.expiry_margin,
            sleep=sleep,
        )
        _print(outcome.status)
        if not outcome.late:
            return outcome.status.status == "admitted"
        late.append(outcome.status)
        reporter.event(
            "admission_late",
            attempt=attempt,
            attempts=cfg.join_attempts,
            deadline_round=outcome.status.answer_deadline_round,
            reason=outcome.status.reason or "late",
        )
    raise AdmissionLateError(late)


def _send_join(
    service: ChallengeClient,
    key: Hotkey,
    cfg: MinerConfig,
    body: JoinRequest,
    reporter: Reporter,
    *,
    after_refusal: bool,
    sleep: Callable[[float], None],
) -> JoinAnswer:
    """A freshly signed join. After this island's own late answer the service holds the
    hotkey back (409 ``backoff``) for some rounds: wait that out, polling, up to
    :data:`MAX_BACKOFF_WAIT_S`. A backoff before the first attempt (an earlier run's
    refusals) is the caller's error, as is every other refusal."""
    waited_s = 0.0
    while True:
        env = seal(
            key,
            domain="join",
            run_id=cfg.run_id,
            body=body.model_dump(mode="json"),
            expiry_round=service.beacon_round() + cfg.expiry_margin,
        )
        try:
            return service.join(env)
        except ServiceError as exc:
            if not after_refusal or exc.code != "backoff" or waited_s >= MAX_BACKOFF_WAIT_S:
                raise
            if waited_s == 0.0:
                reporter.event("admission_backoff", reason=str(exc)[:500])
        sleep(cfg.poll_s)
        waited_s += cfg.poll_s


def _print(answer: JoinAnswer | AdmissionStatus) -> None:
    sys.stdout.write(json.dumps(answer.model_dump(mode="json"), sort_keys=True) + "\n")
