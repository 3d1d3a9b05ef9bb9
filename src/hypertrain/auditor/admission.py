"""The worker's half of the admission challenge: recompute the reference, post it.

For every answered challenge of a device class this worker can compute (its own, by
default), run the self-check workload with the challenge's seed, rebuild the memory
proof's table of each sampled device (the service names the (device, query) pairs, drawn
from a beacon round after the answer) and recompute those answers, and post a signed
``admission-check`` carrying both. The service admits the island only if every one of
its devices answered the reference hash and every sampled memory answer matches.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import JoinAnswer, PendingAdmission
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import AdmissionCheck, MemoryCheck
from hypertrain.trainer.memproof import check_answers
from hypertrain.trainer.selfcheck import SelfcheckConfig, device_class, workload_hash

Emit = Callable[..., None]


def reference_hash(seed: int, steps: int, device: torch.device) -> str:
    return workload_hash(device, SelfcheckConfig(seed=seed, steps=steps))


def memory_checks(item: PendingAdmission, device: torch.device) -> list[MemoryCheck]:
    """The sampled answers, each device's table rebuilt once (integer arithmetic: any
    device computes the island's bytes)."""
    assert item.seed is not None
    by_device: dict[int, list[int]] = {}
    for index, query in item.memory_sample:
        by_device.setdefault(index, []).append(query)
    out = []
    for index, queries in sorted(by_device.items()):
        answers = check_answers(item.seed, index, item.memory_claims[index], queries, device)
        out += [
            MemoryCheck(device=index, query=q, answer=a)
            for q, a in zip(queries, answers, strict=True)
        ]
    return out


def check_admissions(
    service: ChallengeClient,
    key: Hotkey,
    run_id: str,
    *,
    device: torch.device | None = None,
    classes: frozenset[str] | None = None,
    emit: Emit | None = None,
    expiry_margin: int = 50,
) -> list[JoinAnswer]:
    """Post a reference for each answered challenge of ``classes`` (default: this
    device's class); returns the service's answers. One bad entry never stops the rest."""
    device = device or torch.device("cpu")
    classes = classes if classes is not None else frozenset({device_class(device)})
    answers = []
    for item in service.admissions(run_id):
        if item.device_class not in classes or item.seed is None:
            continue
        try:
            body = AdmissionCheck(
                hotkey=item.hotkey,
                seed_beacon_round=item.seed_beacon_round,
                reference_hash=reference_hash(item.seed, item.workload_steps, device),
                memory=memory_checks(item, device),
            )
            env = seal(
                key,
                domain="admission-check",
                run_id=run_id,
                body=body.model_dump(mode="json"),
                expiry_round=service.beacon_round() + expiry_margin,
            )
            answers.append(service.admission_check(env))
        except (ServiceError, ValueError, KeyError, TypeError) as exc:
            if emit is not None:
                emit("error", admission=item.hotkey, detail=str(exc)[:500])
    return answers
