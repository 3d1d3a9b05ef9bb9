"""The public inputs of one island's round, each verified before use.

* :func:`open_dataset`: the local prepared dataset, checked against the manifest's
  descriptor hash and dataset root.
* :func:`round_sample_ids`: the island's sample ids for a round, recomputed from
  every round-open record so far (the assignment walks one keyed permutation per
  epoch, so round ``w`` depends on the rosters of rounds ``0..w``, and each island's
  share of a round is H steps of the layout its record names);
  :func:`iter_round_assignments` walks that chain once for every island of every round
  (from round 0, or on from an epoch state an earlier walk returned:
  :mod:`hypertrain.evidence.opens` keeps them for a long-lived role).
* :func:`segment_samples`: the part of those a replay of one segment trains on (the
  island's training, an audit and both parties of a dispute take the same part).
* :func:`load_samples`: ``(id, tokens)`` pairs, each checked against the dataset root.
* :func:`fetch_start_params`: the round's start model from a relay, hash-checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from torch import Tensor

from hypertrain.data import DESCRIPTOR_NAME, DataError, Dataset, EpochState, assign_round
from hypertrain.data.assignment import RoundAssignment
from hypertrain.evidence.errors import VerificationError
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.errors import TrainerError
from hypertrain.trainer.segment import Sample, TrainConfig

T = TypeVar("T")


class BlobSource(Protocol):
    def get(self, sha256: str, *, max_bytes: int = ...) -> bytes: ...


def open_dataset(dataset_dir: Path, manifest: RunManifest) -> Dataset:
    """Open the prepared dataset and refuse one other than the manifest pins."""
    try:
        dataset = Dataset(
            dataset_dir / DESCRIPTOR_NAME, expected_sha256=manifest.data.descriptor_sha256
        )
    except (DataError, OSError) as exc:
        raise VerificationError(f"dataset in {dataset_dir.name}: {exc}") from exc
    if dataset.descriptor.dataset_root != manifest.data.dataset_root:
        raise VerificationError("local dataset root is not the manifest's dataset root")
    if dataset.seq_len != manifest.data.seq_len:
        raise VerificationError("local dataset seq_len differs from the manifest")
    return dataset


def island_layout(manifest: RunManifest, record: RoundOpen, hotkey: str) -> LayoutSpec:
    """The layout ``hotkey`` trains with in the round ``record`` opened."""
    return record.layout_of(hotkey, manifest.round.layout)


def samples_per_round(manifest: RunManifest, layout: LayoutSpec | None = None) -> int:
    """An island's budget: H steps of its layout's ``samples_per_step`` samples."""
    return manifest.round.island_samples(manifest.round.layout if layout is None else layout)


def round_sample_ids(
    manifest: RunManifest, dataset: Dataset, opens: Sequence[RoundOpen], hotkey: str
) -> list[int]:
    """The ids ``hotkey`` trains on in the last of ``opens`` (records of rounds 0..w)."""
    if not opens or [o.round for o in opens] != list(range(len(opens))):
        raise VerificationError("round-open records must be rounds 0..w in order")
    *_, last = iter_round_assignments(manifest, dataset, opens)
    try:
        return last.for_hotkey(hotkey)
    except DataError as exc:
        raise VerificationError(f"assignment of round {opens[-1].round}: {exc}") from exc


def iter_round_assignments(
    manifest: RunManifest,
    dataset: Dataset,
    opens: Sequence[RoundOpen],
    after: EpochState | None = None,
) -> Iterator[RoundAssignment]:
    """Every island's ids in each of ``opens`` (consecutive records), in round order: the
    epoch chain walked once, from round 0 (``after`` None) or from ``after``, the epoch
    state after the round before ``opens[0]`` (what an earlier walk returned for it)."""
    first = opens[0].round if opens else 0
    if [o.round for o in opens] != list(range(first, first + len(opens))):
        raise VerificationError("round-open records must be consecutive rounds in order")
    if (after is None) != (first == 0):
        raise VerificationError(
            f"an assignment walk from round {first} needs the epoch state before it"
            if after is None
            else "an assignment walk from round 0 starts from no epoch state"
        )
    state = after
    for record in opens:
        roster = [
            (h, samples_per_round(manifest, island_layout(manifest, record, h)))
            for h in record.roster
        ]
        try:
            result = assign_round(
                bytes.fromhex(record.assignment_key), roster, dataset.split(), state
            )
        except DataError as exc:
            raise VerificationError(f"assignment of round {record.round}: {exc}") from exc
        state = result.state
        yield result


def segment_samples(round_samples: Sequence[T], config: TrainConfig, segment: int) -> Sequence[T]:
    """The samples (or sample ids) segment ``segment`` of a round trains on: its ``J``
    steps of ``samples_per_step`` each, in the round's order (``trainer.round_loop``'s)."""
    per_segment = config.checkpoint_interval * config.samples_per_step
    return round_samples[segment * per_segment : (segment + 1) * per_segment]


def load_samples(dataset: Dataset, ids: Sequence[int]) -> list[Sample]:
    """Each sample's tokens after checking them against the dataset root."""
    try:
        return [(i, dataset.verified_sample(i)) for i in ids]
    except DataError as exc:
        raise VerificationError(str(exc)) from exc


def fetch_start_params(
    relay: BlobSource, record: RoundOpen, manifest: RunManifest
) -> tuple[bytes, dict[str, Tensor]]:
    """The round's start model (bytes and parameters), refused unless its hash matches."""
    data = relay.get(record.start_model_sha256)
    try:
        params = decode_model_blob(data, manifest.model, record.start_model_sha256)
    except TrainerError as exc:
        raise VerificationError(f"start model of round {record.round}: {exc}") from exc
    return data, params
