"""The worker's half of the admission challenge: recompute the reference hash, post it.

For every answered challenge of a device class this worker can compute (its own, by
default), run the self-check workload with the challenge's seed and post a signed
``admission-check`` carrying the reference hash. The service admits the island only
if every one of its devices answered that hash in time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from hypertrain.challenge.client import ChallengeClient
from hypertrain.challenge.errors import ServiceError
from hypertrain.challenge.models import JoinAnswer
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import AdmissionCheck
from hypertrain.trainer.selfcheck import SelfcheckConfig, device_class, workload_hash

Emit = Callable[..., None]


def reference_hash(seed: int, steps: int, device: torch.device) -> str:
    return workload_hash(device, SelfcheckConfig(seed=seed, steps=steps))


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
