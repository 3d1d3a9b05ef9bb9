"""Admission checks for a join request: pure functions over the manifest and the report.

No operator is in the loop: an island is admitted when its hardware report is
internally consistent and matches the run. The service never runs the self-check
workload itself (and never imports torch): it compares the hashes the island
reports with the reference hashes the signed manifest carries per device class,
which the operator produced by running ``python -m hypertrain.miner.admission
selfcheck`` on a reference machine of that class.

With ``admission.challenge`` on, that self-reported hash is not enough: the join opens
a challenge (:mod:`hypertrain.challenge.admission.challenge`) whose workload seed
(:func:`challenge_seed`) comes from a beacon round after the request, and whose memory
proof makes each device hold the memory it claims. Each claim must be at least the
layout's per-device floor (:func:`hypertrain.protocol.memproof.memory_floor`).
"""

from __future__ import annotations

from typing import Final

from hypertrain.challenge.errors import AdmissionError
from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.domains import SELFCHECK, tagged_hasher
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.memproof import memory_floor, table_shape
from hypertrain.protocol.messages import JoinRequest

MAX_ISLAND_DEVICES: Final = 1024


def challenge_seed(run_id: str, hotkey: str, beacon_round: int, randomness: str) -> int:
    """The workload seed of ``hotkey``'s admission challenge: 63 bits of a tagged hash
    of the run, the hotkey and the (verified) beacon randomness of the seed round."""
    doc = {
        "run_id": run_id,
        "hotkey": hotkey,
        "beacon_round": beacon_round,
        "randomness": randomness,
    }
    hasher = tagged_hasher(SELFCHECK)
    hasher.update(b"challenge:" + canonical_bytes(doc))
    return int.from_bytes(hasher.digest()[:8], "big") & ((1 << 63) - 1)


def check_join(manifest: RunManifest, request: JoinRequest, *, self_reported: bool = True) -> str:
    """Refuse an unfit island with :class:`AdmissionError`; returns its device class.

    ``self_reported=False`` (challenge admission) skips the comparison of the reported
    workload hash with the manifest's reference: the challenge answer replaces it."""
    devices = request.devices
    indices = [d.index for d in devices]
    if len(set(indices)) != len(indices):
        raise AdmissionError("device indices repeat in the hardware report", code="bad_report")
    classes = {d.device_class for d in devices}
    if len(classes) != 1:
        raise AdmissionError(
            f"an island must be one device class, report has {sorted(classes)}",
            code="mixed_devices",
        )
    device_class = classes.pop()
    hashes = {d.workload_hash for d in devices}
    if self_reported and len(hashes) != 1:
        raise AdmissionError(
            "self-check hashes differ between the island's devices", code="selfcheck_mismatch"
        )
    reference = manifest.selfcheck_reference.get(device_class)
    if reference is None and self_reported:
        raise AdmissionError(
            f"device class {device_class!r} has no self-check reference in this run",
            code="unknown_device_class",
        )
    if self_reported and hashes.pop() != reference:
        raise AdmissionError(
            f"self-check hash differs from the reference for {device_class!r}",
            code="selfcheck_mismatch",
        )
    _check_layout(manifest, request)
    _check_memory(manifest, request)
    return device_class


def _check_memory(manifest: RunManifest, request: JoinRequest) -> None:
    """Every device claims a provable amount whose table proves at least what the layout
    needs per device.

    The test is on the bytes the claim's table proves (the claim rounded down to whole
    rows), never on the declared figure: under the admission challenge the island's
    budget (its layout) is admitted only on that proof (:func:`proven_memory_problem`)."""
    for device in request.devices:
        try:
            table_shape(device.memory_bytes)
        except ValueError as exc:
            raise AdmissionError(f"device {device.index}: {exc}", code="bad_claim") from None
    problem = proven_memory_problem(manifest, request)
    if problem is not None:
        raise AdmissionError(problem, code="insufficient_memory")


def proven_memory_problem(manifest: RunManifest, request: JoinRequest) -> str | None:
    """Why the memory the devices' tables prove cannot carry the request's layout (None:
    it can). The floor is the float32 weights a device holds; the figure compared with it
    is :attr:`~hypertrain.protocol.memproof.TableShape.proven_bytes`, so a claim larger
    than what its table proves buys nothing."""
    floor = memory_floor(manifest, request.layout)
    for device in request.devices:
        proven = table_shape(device.memory_bytes).proven_bytes
        if proven < floor:
            return (
                f"device {device.index} proves {proven} bytes (claims {device.memory_bytes});"
                f" this layout needs {floor} per device"
            )
    return None


def _check_layout(manifest: RunManifest, request: JoinRequest) -> None:
    """One rank per device, and a layout within the run's limits.

    The layout fixes the island's sample budget (H × samples per step), so it is part
    of what the island is admitted with; ``micro_batch_size`` must be the run's.
    """
    layout = request.layout
    if len(request.devices) > MAX_ISLAND_DEVICES:
        raise AdmissionError(f"more than {MAX_ISLAND_DEVICES} devices", code="bad_layout")
    if layout.dp_ranks != len(request.devices):
        raise AdmissionError(
            f"layout has {layout.dp_ranks} ranks for {len(request.devices)} devices",
            code="bad_layout",
        )
    if layout.world_size != len(request.devices):
        raise AdmissionError(
            f"layout runs {layout.world_size} processes on {len(request.devices)} devices",
            code="bad_layout",
        )
    problem = manifest.layout_problem(layout)  # limits, and experts ep must split
    if problem is not None:
        raise AdmissionError(f"layout outside the run's limits: {problem}", code="bad_layout")
