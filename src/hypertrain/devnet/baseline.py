"""The data-parallel baseline of a run: one model trained on the tokens the run merged.

A round ``r`` of the run trains H steps on every island; the merge keeps the islands its
tape lists as ``included``. The baseline takes, at each of those H steps, the union of
the included islands' samples of that step (roster order) as one global batch, and takes
one step of the run's inner optimizer on it (``trainer.warm_start.run_data_parallel``:
the warm start's own step, at the same global step of the same schedule). It starts from
the run's warm start, trained by the same function on the same samples, with its
optimizer state kept: what one data-parallel cluster would have trained on exactly the
run's tokens. Every input is public (the manifest, the dataset, the coordinator-signed
round-open records and the merge tapes), and the samples come from the run's own
assignment code (``evidence.inputs.iter_round_assignments``), so the baseline sees
exactly the tokens the islands saw.

:class:`BaselineStore` keeps the baseline's state after each round and its held-out loss
per round in a directory, so a long baseline resumes where it stopped. Beside a running
network, :class:`BaselineThread` posts the curve to the service after each round it
trains (``PUT /admin/v1/runs/{run_id}/baseline``), so the dashboard draws it beside the
network's; it is informational only and feeds no hash, verdict or reward.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hypertrain.aggregator.heldout import heldout_batch, heldout_loss
from hypertrain.api.baseline import BaselineIn
from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail
from hypertrain.data.dataset import Dataset
from hypertrain.evidence.genesis import warm_start_batches
from hypertrain.evidence.inputs import island_layout, iter_round_assignments, load_samples
from hypertrain.evidence.verify import verify_round_open
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.trainer.checkpoint import decode_checkpoint, encode_checkpoint
from hypertrain.trainer.round_config import island_train_config
from hypertrain.trainer.segment import Sample
from hypertrain.trainer.state import TrainState, init_state
from hypertrain.trainer.warm_start import run_data_parallel, run_warm_start

Batches = list[list[Sample]]


def round_batches(
    manifest: RunManifest,
    dataset: Dataset,
    opens: Sequence[RoundOpen],
    included: Sequence[Sequence[str]],
    *,
    first: int = 0,
) -> Iterator[Batches]:
    """Each round's H global batches: step ``i`` is every included island's step-``i``
    samples, in roster order (``included[r]``: the hotkeys round ``r``'s merge kept).
    Rounds before ``first`` yield no batches (their samples are not loaded)."""
    if len(included) != len(opens):
        raise ValueError(f"{len(opens)} round-open records but {len(included)} merges")
    steps = manifest.round.inner_steps
    for record, assignment, kept in zip(
        opens, iter_round_assignments(manifest, dataset, opens), included, strict=True
    ):
        batches: Batches = [[] for _ in range(steps)]
        for hotkey, ids in assignment.islands:
            if hotkey not in kept or record.round < first:
                continue
            per = island_layout(manifest, record, hotkey).samples_per_step
            samples = load_samples(dataset, [int(i) for i in ids])
            for i in range(steps):
                batches[i].extend(samples[i * per : (i + 1) * per])
        yield batches


@dataclass(frozen=True, slots=True)
class BaselineStore:
    """A baseline's resumable state: ``losses.json`` (the warm start's held-out loss and one
    per finished round) and ``state-N.ckpt``, the state after its N finished rounds.

    A save writes the new state beside the old one, then the losses, then drops the old
    state, so a stop anywhere between leaves a state that matches the losses: a round is
    retrained from where it began, never trained twice or skipped."""

    directory: Path
    manifest: RunManifest

    def _state_path(self, rounds: int) -> Path:
        return self.directory / f"state-{rounds}.ckpt"

    @property
    def _losses_path(self) -> Path:
        return self.directory / "losses.json"

    def losses(self) -> dict[str, list[float]]:
        if not self._losses_path.exists():
            return {"warm_start": [], "rounds": []}
        value: dict[str, list[float]] = json.loads(self._losses_path.read_text("utf-8"))
        return value

    def state(self) -> TrainState | None:
        """The state after the rounds ``losses.json`` holds (None before the first save)."""
        path = self._state_path(len(self.losses()["rounds"]))
        if not path.exists():
            return None
        config = island_train_config(self.manifest, 0).state_config()
        return decode_checkpoint(path.read_bytes(), config)

    def save(self, state: TrainState, losses: dict[str, list[float]]) -> None:
        """Write the state after ``losses``' rounds, then the losses (each atomically), then
        drop every other state."""
        self.directory.mkdir(parents=True, exist_ok=True)
        rounds = len(losses["rounds"])
        _atomic(self._state_path(rounds), encode_checkpoint(state))
        _atomic(self._losses_path, json.dumps(losses).encode())
        for old in self.directory.glob("state-*.ckpt"):
            if old != self._state_path(rounds):
                old.unlink()


def train_baseline(
    manifest: RunManifest,
    dataset: Dataset,
    rounds: Iterable[Batches],
    store: BaselineStore,
) -> list[float]:
    """The baseline's held-out loss after each round (the aggregator's figure: the same
    held-out samples and function), resuming from ``store``; returns every round's."""
    heldout = heldout_batch(dataset)
    losses = store.losses()
    state = store.state()
    if state is None or not losses["warm_start"]:
        state = _warm_start(manifest, dataset)
        losses = {"warm_start": [heldout_loss(state.params(), manifest, heldout)], "rounds": []}
        store.save(state, losses)
    for index, batches in enumerate(rounds):
        if index < len(losses["rounds"]):
            continue  # finished before a stop
        # a step whose islands were all left out of the merge trained nothing there either
        state = run_data_parallel(manifest, [b for b in batches if b], state)
        losses["rounds"].append(heldout_loss(state.params(), manifest, heldout))
        store.save(state, losses)
    return losses["rounds"]


def record_batches(
    manifest: RunManifest, dataset: Dataset, details: Sequence[RoundDetail], *, first: int = 0
) -> Iterator[Batches]:
    """:func:`round_batches` of final rounds' public records (rounds 0..n in order): their
    coordinator-signed round-open records and the islands their current merge included."""
    opens = [verify_round_open(d.open, manifest, d.round) for d in details]
    included = [list(tape.included) if (tape := d.current_merge()) else [] for d in details]
    return round_batches(manifest, dataset, opens, included, first=first)


def train_on_records(
    manifest: RunManifest, dataset: Dataset, details: Sequence[RoundDetail], store: BaselineStore
) -> list[float]:
    """Train the baseline on every round of ``details`` it has not trained yet."""
    done = len(store.losses()["rounds"])
    rounds = record_batches(manifest, dataset, details, first=done)
    return train_baseline(manifest, dataset, rounds, store)


def _warm_start(manifest: RunManifest, dataset: Dataset) -> TrainState:
    """The run's warm start (its optimizer state kept), or the seed's initial state."""
    if manifest.warm_start is None:
        return init_state(island_train_config(manifest, 0).state_config(), manifest.seed)
    return run_warm_start(manifest, warm_start_batches(manifest, dataset))


def _atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


class BaselineThread(threading.Thread):
    """Trains the baseline beside a running network, each round once it is final: the
    devnet's report then prints both curves without waiting for a second run. (It is
    not cached between runs: which samples a round trains depends on the beacon round
    that opened it, so no two runs train the same tokens.)

    With ``admin_token`` it posts the curve to the service after each round it trains; a
    post that fails is recorded in ``error`` and tried again, whole, after the next round.
    """

    def __init__(
        self,
        url: str,
        manifest: RunManifest,
        dataset: Dataset,
        store: BaselineStore,
        *,
        admin_token: str | None = None,
    ) -> None:
        super().__init__(name="baseline", daemon=True)
        self.url, self.manifest, self.dataset, self.store = url, manifest, dataset, store
        self.admin_token = admin_token
        self.details: list[RoundDetail] = []
        self.error: str | None = None
        self.posted = 0  # rounds of the curve last posted (or tried)
        self._crashed = False
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            with self._client() as service:
                while not self._halt.wait(1.0):
                    self.step(service)
        except Exception as exc:  # reported, never raised: the network runs on without it
            self.error, self._crashed = f"{type(exc).__name__}: {exc}", True

    def _client(self) -> ChallengeClient:
        return ChallengeClient(self.url, admin_token=self.admin_token)

    def step(self, service: ChallengeClient) -> None:
        """Fetch the newly final rounds and train the baseline on them."""
        try:
            for summary in service.rounds(self.manifest.run_id)[len(self.details) :]:
                if summary.phase != "final":
                    break
                detail = service.round_detail(self.manifest.run_id, summary.round)
                if detail.current_merge() is None:
                    break  # final without a tape yet (a rollback in flight): ask again
                self.details.append(detail)
        except ServiceError:
            return  # asked again at the next poll
        self.publish(service, self.train())

    def publish(self, service: ChallengeClient, losses: list[float]) -> None:
        """Post the curve to the service's dashboard once it has a round not posted yet
        (informational only: it feeds no hash, verdict or reward). Without an admin token
        nothing is posted; a refusal is recorded in ``error``, never raised."""
        if self.admin_token is None or len(losses) <= self.posted:
            return
        self.posted = len(losses)
        try:
            service.put_baseline(self.manifest.run_id, BaselineIn(heldout_loss=losses))
        except (ServiceError, ValidationError) as exc:  # e.g. a non-finite loss
            self.error = f"posting the baseline curve: {exc}"

    def train(self) -> list[float]:
        return train_on_records(self.manifest, self.dataset, self.details, self.store)

    def finish(self, timeout_s: float) -> dict[str, Any]:
        """Stop polling, train every final round still missing (the service is still up),
        and say what it got: the held-out loss per round, or why it has none."""
        self._halt.set()
        self.join(timeout_s)
        if not self._crashed and not self.is_alive():
            try:
                with self._client() as service:
                    self.step(service)
            except Exception as exc:  # the report says so; the run's own figures stand
                self.error = f"{type(exc).__name__}: {exc}"
        return {"heldout_loss": self.store.losses()["rounds"], "error": self.error}
