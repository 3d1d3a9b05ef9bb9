"""``hypertrain-miner compete best``: the current best model, verified, as a loadable directory.

The best model is the one the latest settled cycle paid most (the leaderboard's first
row). Nothing the service or the relay says is taken on trust: the cycle's standings
are recomputed from its signed scores (:func:`~hypertrain.competition.replay.replay_cycle`),
the revealed file list must hash to the model hash, the model hash bound to the
winner's hotkey must be the commitment the service recorded, and every file must hash
to its listed SHA-256 as it arrives. The files land in a temporary folder beside the
target, pass the competition's checks (the ones evaluators run) and only then take its
name, so ``--out`` holds either the whole verified model or nothing: a ``config.json``
and safetensors directory that ``transformers`` loads offline
(``AutoModelForCausalLM.from_pretrained(DIR)``).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypertrain.api.competition import CompetitionClient
from hypertrain.competition.checks import check_directory
from hypertrain.competition.messages import CycleModel, CycleRecord
from hypertrain.competition.replay import replay_cycle
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError, commitment, model_hash
from hypertrain.miner.errors import MinerError
from hypertrain.relay.client import RelayClient
from hypertrain.relay.errors import HashMismatchError, RelayError


class NoBestModelError(MinerError):
    """The competition has no settled cycle that paid a model yet."""


class BestModelMismatchError(MinerError):
    """What the service or the relay served does not match the winner's commitment."""


@dataclass(frozen=True, slots=True)
class BestModel:
    """The downloaded winner: whose, which, from which cycle, and where it now lies."""

    hotkey: str
    model_sha256: str
    commitment: str
    cycle: int
    out: Path


def best_listing(spec: CompetitionSpec, record: CycleRecord) -> CycleModel:
    """The listed model the cycle paid most, after replaying the cycle from its signed
    scores (the stored standings must be the replay's) and checking its commitment."""
    try:
        replayed = replay_cycle(spec, record)
    except ValueError as exc:
        raise BestModelMismatchError(f"cycle {record.cycle} does not verify: {exc}") from None
    if replayed != record.results:
        raise BestModelMismatchError(
            f"cycle {record.cycle}: the service's standings are not the replay of its scores"
        )
    paid = [r for r in replayed if r.counted and r.units > 0]
    if not paid:
        raise NoBestModelError(f"cycle {record.cycle} paid no model")
    best = max(paid, key=lambda r: r.units)  # the replay lists best first; the first max
    listing = next(m for m in record.task.listed() if m.model_sha256 == best.model_sha256)
    if model_hash(listing.files) != listing.model_sha256:
        raise BestModelMismatchError("the revealed file list does not hash to the model hash")
    if commitment(listing.model_sha256, listing.hotkey) != listing.commitment:
        raise BestModelMismatchError("the model hash is not the commitment the winner made")
    return listing


def download_best(client: CompetitionClient, cid: str, out: Path) -> BestModel:
    """Find, verify and write the current best model of ``cid`` into ``out`` (absent or
    empty); raises :class:`NoBestModelError`, :class:`BestModelMismatchError` or
    :class:`MinerError` (relay unreachable, files missing)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MinerError(f"{out} exists and is not an empty directory")
    spec = client.competition(cid)
    board = client.leaderboard(cid)
    if board.latest_cycle is None:
        raise NoBestModelError(f"competition {cid} has no settled cycle yet: no best model")
    record = client.cycle_record(cid, board.latest_cycle)
    listing = best_listing(spec, record)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".best-", dir=out.parent))
    try:
        _fetch(listing, cid, staging)
        check_directory(staging, spec.architecture, spec.data.seq_len)
        if out.exists():
            out.rmdir()
        staging.rename(out)
    except SubmissionError as exc:
        raise BestModelMismatchError(
            f"the best model fails the competition's checks: {exc}"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BestModel(listing.hotkey, listing.model_sha256, listing.commitment, record.cycle, out)


def _fetch(listing: CycleModel, cid: str, folder: Path) -> None:
    """Every file of the listing from its relay, each hashed against the revealed list."""
    with RelayClient(listing.base_url, None, cid) as relay:
        for f in listing.files:
            try:
                relay.get_to_file(f.sha256, folder / f.name, max_bytes=f.size)
            except HashMismatchError as exc:
                raise BestModelMismatchError(f"{f.name} from {listing.base_url}: {exc}") from None
            except RelayError as exc:
                if exc.reason == "too_large":
                    raise BestModelMismatchError(f"{f.name}: {exc}") from None
                raise MinerError(
                    f"the best model's {f.name} could not be fetched from {listing.base_url}: {exc}"
                ) from None
