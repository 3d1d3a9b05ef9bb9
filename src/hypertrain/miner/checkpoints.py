"""Checkpoints on demand: an island keeps its checkpoints until an audit selects them.

At commit time only the checkpoint index (leaf hashes and the SHA-256 address of each
checkpoint file, hashed locally) and the update go to the relay. Once the round's audit
assignments are signed, the island uploads the start checkpoint of every segment an
auditor must replay (which covers the final-segment update check), except segment 0's
(the public start state), before the upload deadline of
``evidence.index.upload_deadline``. Nothing else ever leaves the island, so a round
costs one update plus the audited checkpoints instead of all ``H/J + 1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.verify import verify_assignment
from hypertrain.miner.island import checkpoint_path
from hypertrain.protocol.manifest import RunManifest
from hypertrain.relay.client import RelayClient
from hypertrain.relay.spool import sha256_file


def checkpoint_addresses(paths: Iterable[Path]) -> tuple[str, ...]:
    """The relay addresses the index promises, computed without uploading anything."""
    return tuple(sha256_file(p)[0] for p in paths)


def selected_segments(
    assignments: Sequence[Any], manifest: RunManifest, hotkey: str
) -> list[int] | None:
    """Segments the coordinator-signed assignments select for ``hotkey`` (None: not audited)."""
    chosen: set[int] = set()
    found = False
    for raw in assignments:
        try:
            assignment = verify_assignment(raw, manifest)
        except VerificationError:
            continue  # not a valid assignment: it obliges nobody to upload
        if assignment.hotkey == hotkey:
            found = True
            chosen.update(assignment.segments)
    return sorted(chosen) if found else None


def checkpoints_to_upload(segments: Sequence[int]) -> list[int]:
    """The selected segments whose start checkpoint an auditor cannot derive itself.

    Segment 0 starts from the round's start state, which auditors (and the dispute
    game) derive from public records under either state policy (``auditor.start``)
    and check against leaf 0; uploading it would only move bytes.
    """
    return [k for k in segments if k > 0]


def upload_selected(
    relay: RelayClient, workdir: Path, round_index: int, segments: Sequence[int], expiry: int
) -> int:
    """Upload the start checkpoint of each selected segment that needs one; returns the
    bytes sent."""
    sent = 0
    for k in checkpoints_to_upload(segments):
        path = checkpoint_path(workdir, k)
        relay.put(path, kind="checkpoint", round=round_index, expiry_round=expiry)
        sent += path.stat().st_size
    return sent
