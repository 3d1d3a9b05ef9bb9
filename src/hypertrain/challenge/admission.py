"""Admission checks for a join request: pure functions over the manifest and the report.

No operator is in the loop: an island is admitted when its hardware report is
internally consistent and matches the run. The service never runs the self-check
workload itself (and never imports torch): it compares the hashes the island
reports with the reference hashes the signed manifest carries per device class,
which the operator produced by running ``python -m hypertrain.miner.admission
selfcheck`` on a reference machine of that class.
"""

from __future__ import annotations

from typing import Final

from hypertrain.challenge.errors import AdmissionError
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import JoinRequest

MAX_ISLAND_DEVICES: Final = 1024


def check_join(manifest: RunManifest, request: JoinRequest) -> str:
    """Refuse an unfit island with :class:`AdmissionError`; returns its device class."""
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
    if len(hashes) != 1:
        raise AdmissionError(
            "self-check hashes differ between the island's devices", code="selfcheck_mismatch"
        )
    reference = manifest.selfcheck_reference.get(device_class)
    if reference is None:
        raise AdmissionError(
            f"device class {device_class!r} has no self-check reference in this run",
            code="unknown_device_class",
        )
    if hashes.pop() != reference:
        raise AdmissionError(
            f"self-check hash differs from the reference for {device_class!r}",
            code="selfcheck_mismatch",
        )
    failed = [d.index for d in devices if not d.memory_probe_ok]
    if failed:
        raise AdmissionError(f"memory probe failed on devices {failed}", code="memory_probe")
    _check_layout(manifest, request)
    return device_class


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
    problem = manifest.round.layout_problem(layout)
    if problem is not None:
        raise AdmissionError(f"layout outside the run's limits: {problem}", code="bad_layout")
