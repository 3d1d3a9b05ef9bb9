"""The verified view of a run that every miner command starts from.

:func:`load_run` fetches the coordinator-signed manifest (a long-lived command waits
for a service that is away, ``rolekit.when_up``) and checks the local determinism
record against it; :func:`round_records` gives the verified round-open records of rounds
``0..w`` (the assignment of round ``w`` depends on all), each fetched and verified once
for the life of the context (``RunContext.opens``: :mod:`hypertrain.evidence.opens`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import JsonValue

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail
from hypertrain.evidence.opens import OpenRecords
from hypertrain.evidence.verify import verify_manifest
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.errors import MinerError
from hypertrain.miner.hooks import HooksFor, honest
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.rolekit import OnError, when_up
from hypertrain.trainer.determinism import check_determinism, configure_determinism
from hypertrain.trainer.profile import apply_profile


@dataclass(frozen=True, slots=True)
class RunContext:
    config: MinerConfig
    service: ChallengeClient
    manifest: RunManifest
    hooks: HooksFor = honest  # each round's hooks (miner.hooks)
    opens: OpenRecords = field(init=False)  # the records read so far, and the assignments

    def __post_init__(self) -> None:
        object.__setattr__(self, "opens", OpenRecords(self.manifest))


def load_run(
    config: MinerConfig,
    service: ChallengeClient,
    *,
    check: bool = True,
    hooks: HooksFor = honest,
    on_wait: OnError | None = None,
) -> RunContext:
    """The run's verified context. With ``on_wait`` (a long-lived command), a service that
    cannot be reached or fails (5xx) is waited for with backoff, each wait reported to
    ``on_wait``; a refusal (an unknown run: 404) is raised, as every failure is without."""
    config.require("service_url", "run_id")

    def read() -> dict[str, JsonValue]:
        return service.manifest_envelope(config.run_id)

    envelope = read() if on_wait is None else when_up(read, on_wait=on_wait)
    assert envelope is not None  # no stop is asked: a stop signal ends the process
    manifest = verify_manifest(envelope, config.run_id, config.coordinator or None)
    if check:
        det = manifest.determinism
        apply_profile(det)  # may re-execute this process with the run's CPU switches
        local = configure_determinism(det.num_threads, config.device, det.dtype)
        check_determinism(local, det)
    return RunContext(config, service, manifest, hooks)


def _detail(ctx: RunContext, w: int) -> RoundDetail:
    try:
        return ctx.service.round_detail(ctx.manifest.run_id, w)
    except ServiceError as exc:
        if exc.status == 404:
            raise MinerError(f"round {w} of {ctx.manifest.run_id} is not open yet") from exc
        raise


def round_records(ctx: RunContext, index: int) -> tuple[list[RoundOpen], RoundDetail]:
    """Verified open records of rounds 0..index and the detail of round ``index`` (read
    now; earlier rounds' records only the first time they are needed)."""
    detail = _detail(ctx, index)
    return records_to(ctx, detail), detail


def records_to(ctx: RunContext, detail: RoundDetail) -> list[RoundOpen]:
    """Verified open records of rounds 0..``detail.round``, that round's from ``detail``
    (one already read), earlier ones only the first time they are needed."""
    index = detail.round
    return ctx.opens.upto(index, lambda w: detail.open if w == index else _detail(ctx, w).open)
