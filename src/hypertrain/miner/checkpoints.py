"""Checkpoints on demand: an island keeps its checkpoints until an audit selects them.

At commit time only the checkpoint index (leaf hashes and the SHA-256 address of each
checkpoint file, hashed locally) and the update go to the relay. Once the round's audit
assignments are signed, the island uploads the start checkpoint of every segment an
auditor must replay (which covers the final-segment update check), except segment 0's
(the public start state), before the upload deadline of
``evidence.index.upload_deadline``. Under ``carry`` the round's start state holds the
island's optimizer state from its previous round, so an audited island also uploads the
state that round carried (``trainer.carried``: step counter, optimizer slots, residual;
no parameters), written beside that round's checkpoints as ``carried.bin`` and named by
its index, from which auditors derive the start state (``evidence.start``), unless the
round-open record has it start fresh (an island with a proven fault). Nothing the relay
already holds is uploaded again: an auditor that replayed and matched the island's
previous round stored that carried state itself (the record lists the island in
``carry_stored``), and the island uploads it only if the store failed. Nothing else
ever leaves the island, so a round
costs one update plus the audited checkpoints instead of all ``H/J + 1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from torch import Tensor

from hypertrain.api.models import RoundDetail
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.start import carries_previous
from hypertrain.evidence.verify import find_commit, verify_assignment
from hypertrain.miner.context import RunContext, records_to
from hypertrain.miner.island import checkpoint_path
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.relay.client import RelayClient
from hypertrain.relay.spool import sha256_file
from hypertrain.trainer.carried import encode_carried, slot_dtype
from hypertrain.trainer.start_state import carried_of
from hypertrain.trainer.state import TrainState

CARRIED_FILE: Final = "carried.bin"  # the state a round carries into the next (carry)


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


def write_carried(
    workdir: Path, final: TrainState, start_params: Mapping[str, Tensor], manifest: RunManifest
) -> Path:
    """Write the state the round carries into the next (``carried.bin``, atomically), its
    optimizer slots in the run's carried width."""
    path = workdir / CARRIED_FILE
    tmp = path.with_name(path.name + ".tmp")
    slots = slot_dtype(manifest.inner)
    tmp.write_bytes(
        encode_carried(carried_of(final, start_params, manifest.compression, slots=slots))
    )
    tmp.replace(path)
    return path


def carried_checkpoint(
    manifest: RunManifest, record: RoundOpen, hotkey: str, previous_dir: Path, *,
    committed: bool,
) -> Path | None:  # fmt: skip
    """The carried state of the previous round an audit of round ``record.round`` needs
    under ``carry``: owed only when this island has a commit in that round (``committed``)
    and the record does not start it fresh, the facts the start state is derived from
    (``evidence.start``); None otherwise (the start state is public), or when this island
    kept no previous round. A file written for a commit the service refused is not owed.
    :func:`upload_selected` skips it when the relay already holds it: the auditor that
    matched the round before stored it (the record's ``carry_stored``)."""
    if manifest.inner.state_policy != "carry" or not carries_previous(manifest, record, hotkey):
        return None
    if not committed:
        return None
    path = previous_dir / CARRIED_FILE
    return path if path.exists() else None


def owed_carried(ctx: RunContext, hotkey: str, detail: RoundDetail) -> Path | None:
    """The previous carried state an audit of round ``detail.round`` needs from ``hotkey``
    (:func:`carried_checkpoint`, ``committed`` from the service's record of the round
    before: the start state is derived from that commit)."""
    index = detail.round - 1
    committed = index >= 0 and (
        find_commit(ctx.service.round_detail(ctx.manifest.run_id, index), hotkey) is not None
    )
    record = records_to(ctx, detail)[-1]
    previous = ctx.config.round_dir(index)
    return carried_checkpoint(ctx.manifest, record, hotkey, previous, committed=committed)


def upload_selected(
    relay: RelayClient,
    workdir: Path,
    round_index: int,
    segments: Sequence[int],
    expiry: int,
    carried: Path | None = None,
) -> int:
    """Upload the start checkpoint of each selected segment that needs one and, under
    ``carry``, the previous round's carried state (``carried``), each unless the origin
    relay already holds it with an arrival record (an auditor stores the carried state of
    a round it matched; a regional relay's copy whose forward failed does not count);
    returns the bytes sent."""
    sent = 0
    paths = [checkpoint_path(workdir, k) for k in checkpoints_to_upload(segments)]
    for path in [*paths, *([carried] if carried is not None else [])]:
        sha256, size = sha256_file(path)
        if relay.held_at_origin(sha256, size):
            continue  # what the audit counts is there (stored by the auditor, or sent before)
        relay.put(path, kind="checkpoint", round=round_index, expiry_round=expiry)
        sent += size
    return sent
