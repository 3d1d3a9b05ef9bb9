"""The aggregator as a process: create the start model, merge rounds, open the next.

* :func:`genesis` publishes round 0's start model: fresh parameters from the manifest
  seed, or, for a run with a warm start, the model the warm start ended with (the file
  ``hypertrain run warm-start`` wrote, ``evidence.genesis``); the service's round-open
  record needs its hash and URL, and nothing else creates it.
* :func:`merge_round` collects round ``w`` from the service, merges it against the
  blobs, publishes the outer state, the model, the start-model broadcast (when the
  manifest's ``outer.broadcast`` asks for one: ``trainer.broadcast``) and the full
  tape to the relay, then
  posts the signed ``merge-tape`` message, which names the included islands and the
  reasons the others were excluded (settlement pays only the included ones).
* Given a held-out batch (``--dataset-dir``), each new model's held-out loss
  (:mod:`hypertrain.aggregator.heldout`) rides on the merge-tape message as
  ``eval_loss``, which the dashboard's training curve shows.
* :func:`follow` polls the service: it merges every round that reaches the merge
  phase (a round with an update not on the relay waits, event ``waiting``, until the
  relay's clock has passed its upload deadline: :mod:`~hypertrain.aggregator.availability`),
  rebases the merged chain when the service reports a fault proven for a merged update
  (:meth:`Aggregator.rollback_step`: :mod:`~hypertrain.aggregator.corrections`
  finds it, :mod:`~hypertrain.aggregator.rebase` recomputes it, each corrected round is
  posted as a signed ``merge-correction``) and, given the admin token, opens round 0
  (with the genesis model) and each next round once the previous one is merged, on the
  model the service names: the round's current (corrected) model, where witnesses are
  required once they cleared it (docs/mechanism.md, "Tape witnesses"). Corrections never
  stand in the way of the next round (:meth:`Aggregator.correct`): a refused or failed
  one is the event ``correction_refused`` (the service's status, code and reason) and
  is derived afresh and tried again with backoff, while rounds go on opening on the
  model the service names.

State kept in ``state_dir``: the tapes it produced and the update hashes already
merged (for the ``stale_update`` rule). Each event is reported to ``emit`` as one
flat dict, which the CLI prints as a JSON line.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import torch

from hypertrain.aggregator import chain, corrections
from hypertrain.aggregator.aggregate import earlier_updates, older_updates
from hypertrain.aggregator.availability import UndecidedError, updates_deadline
from hypertrain.aggregator.blobs import BlobStore, republish_missing
from hypertrain.aggregator.collect import collect
from hypertrain.aggregator.errors import BlobError, GenesisError, UpdateFormatError
from hypertrain.aggregator.heldout import heldout_loss
from hypertrain.aggregator.merge import MergeInputs, MergeResult, merge
from hypertrain.aggregator.rebase import rebase
from hypertrain.aggregator.records import run_manifest
from hypertrain.aggregator.screen import proven_history
from hypertrain.aggregator.sketch import SketchCache
from hypertrain.aggregator.tape import Earlier, Tape, decode_tape
from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundSummary
from hypertrain.evidence.errors import CoordinatorError
from hypertrain.evidence.genesis import genesis_blob
from hypertrain.evidence.verify import coordinator_of, verify_round_open
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.exclusions import ExclusionReason
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import MergeCorrection, MergeTape
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.errors import CodecError, TrainerError
from hypertrain.trainer.model import param_shapes

log = logging.getLogger(__name__)
Emit = Callable[[dict[str, Any]], None]
EXPIRY_MARGIN = 10
GenesisModel = Callable[[RunManifest], bytes]  # the run's round-0 model blob, however found


def genesis(
    manifest: RunManifest, store: BlobStore, model: GenesisModel | None = None
) -> tuple[str, str]:
    """Publish the round-0 model: ``model``'s (a warm start's) or, without a warm start,
    fresh parameters from the manifest seed."""
    warm = manifest.warm_start
    if model is None:
        if warm is not None:
            raise GenesisError(
                f"run {manifest.run_id} starts from a {warm.steps}-step warm start: give its"
                " model (--genesis-model FILE, written by hypertrain run warm-start)"
            )
        blob = genesis_blob(manifest)
    else:
        blob = model(manifest)
        try:
            decode_model_blob(blob, manifest.model)
        except TrainerError as exc:
            raise GenesisError(
                f"the genesis model does not fit run {manifest.run_id}: {exc}"
            ) from exc
        if warm is None and blob != genesis_blob(manifest):
            raise GenesisError(
                f"run {manifest.run_id} has no warm start: round 0 starts from its seed's"
                " model, not from the one given"
            )
    sha = store.put(blob, kind="model", round=0)
    return sha, store.url(sha)


def settlement_exclusions(result: MergeResult) -> dict[str, ExclusionReason]:
    """hotkey -> reason for each excluded island (one not also included), for settlement."""
    return result.tape.settlement_exclusions()


@dataclass
class Aggregator:
    service: ChallengeClient
    store: BlobStore
    key: Hotkey
    run_id: str
    state_dir: Path
    emit: Emit = field(default=lambda event: None)
    heldout: torch.Tensor | None = None  # held-out batch: post each new model's loss
    last_round: int | None = None  # open no round after this one (None: no end)
    genesis_model: GenesisModel | None = None  # round 0's model (a warm start's)
    sketches: SketchCache = field(init=False)  # the run sketch of every public update
    retry: corrections.Backoff = field(default_factory=corrections.Backoff)
    clock: Callable[[], float] = time.monotonic  # for the corrections' backoff
    coordinator: str | None = None  # pinned coordinator SS58 (None: the manifest's own)
    kept_round: int | None = None  # the training round whose start model the relay holds

    def __post_init__(self) -> None:
        self.sketches = SketchCache(self.run_id, self.state_dir / "sketches")

    def _merged_path(self) -> Path:
        return self.state_dir / "merged_updates.json"

    def stale(self) -> frozenset[str]:
        path = self._merged_path()
        return frozenset(json.loads(path.read_text())) if path.is_file() else frozenset()

    def _remember(self, result: MergeResult) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        merged = sorted(self.stale() | {i.update_sha256 for i in result.tape.included})
        self._merged_path().write_text(json.dumps(merged))
        tapes = self.state_dir / "tapes"
        tapes.mkdir(exist_ok=True)
        (tapes / f"{result.tape.round:06d}.json").write_bytes(result.tape.to_bytes())

    def _tapes(self, index: int) -> Iterator[Tape]:
        """The tapes this aggregator produced before round ``index``, newest first."""
        tapes = self.state_dir / "tapes"
        paths = (tapes / f"{w:06d}.json" for w in range(index - 1, -1, -1))
        return (decode_tape(p.read_bytes()) for p in paths if p.is_file())

    def history(self, index: int) -> list[float]:
        """Audit-proven norms of the latest earlier rounds (``screen.proven_history``)."""
        return proven_history(self._tapes(index))

    def earlier(self, index: int) -> list[Earlier]:
        """The last rounds' public updates (``aggregate.earlier_updates``) the relay still
        holds; the tape names exactly these, so ``verify-tape`` screens against the same."""
        kept: list[Earlier] = []
        for e in earlier_updates(self._tapes(index), index):
            try:
                self.store.get(e.update_sha256)
            except BlobError as exc:
                log.warning("round %d: earlier update %s left out: %s", index,
                            e.update_sha256[:16], exc)  # fmt: skip
                continue
            kept.append(e)
        return kept

    def older(self, manifest: RunManifest, index: int, earlier: list[Earlier]) -> list[Earlier]:
        """Every other public update of the run (``aggregate.older_updates``) whose sketch
        this aggregator could compute (each blob is fetched once per process)."""
        shapes = param_shapes(manifest.model)
        kept: list[Earlier] = []
        for e in older_updates(self._tapes(index), index, earlier):
            try:
                self.sketches.of(e.update_sha256, self.store, shapes, manifest.compression)
            except (BlobError, UpdateFormatError, CodecError) as exc:
                log.warning("round %d: older update %s left out: %s", index,
                            e.update_sha256[:16], exc)  # fmt: skip
                continue
            kept.append(e)
        return kept

    def previous_outer(self, manifest: RunManifest, index: int) -> str | None:
        """Outer-state hash of the merge round ``index`` continues (None: zero momentum),
        as it stands after any correction (:func:`chain.previous_outer`)."""
        detail_of = partial(self.service.round_detail, self.run_id)
        return chain.previous_outer(detail_of, index, manifest)

    def merge_round(self, manifest: RunManifest, index: int) -> MergeResult:
        detail = self.service.round_detail(self.run_id, index)
        got = collect(detail, manifest, index, self.stale())
        earlier = self.earlier(index)
        for refused in got.refused_verdicts:  # recorded as no verdict, never merged on
            log.warning("round %d: verdict %s refused: %s", index, refused.verdict_id[:16],
                        refused.reason)  # fmt: skip
        inputs = MergeInputs(
            manifest, index, got.start_model_sha256, self.previous_outer(manifest, index),
            got.candidates, got.excluded, history_norms=self.history(index), proven=got.proven,
            earlier=earlier, older=self.older(manifest, index, earlier), sketches=self.sketches,
            updates_by_round=updates_deadline(detail),
        )  # fmt: skip
        started = time.monotonic()
        result = merge(inputs, self.store)
        body = self.publish(manifest, result)
        answer = self.service.post_merge(self.seal("merge-tape", body.model_dump(mode="json")))
        self._remember(result)
        self.emit({
            "event": "merged", "round": index, "phase": "merge",
            "included": len(result.tape.included), "excluded": len(result.tape.excluded),
            "tokens": result.tape.total_tokens, "bytes": len(result.model_blob),
            "seconds": round(time.monotonic() - started, 3), "model": body.new_model_sha256,
            "tape": body.tape_sha256, "paid": answer.paid, "eval_loss": body.eval_loss,
        })  # fmt: skip
        return result

    def publish(self, manifest: RunManifest, result: MergeResult) -> MergeTape:
        """Store a merge's blobs and tape on the relay; the signed record's body."""
        index = result.tape.round
        self.store.put(result.outer_blob, kind="outer_state", round=index)
        self.store.put(result.model_blob, kind="model", round=index)
        tape_sha = self.store.put(result.tape.to_bytes(), kind="tape", round=index)
        return MergeTape(
            **self.publish_broadcast(result, index),
            round=index,
            start_model_sha256=result.tape.start_model_sha256,
            new_model_sha256=result.tape.new_model_sha256,
            new_model_url=self.store.url(result.tape.new_model_sha256),
            outer_state_sha256=result.tape.new_outer_state_sha256,
            tape_sha256=tape_sha,
            eval_loss=self.eval_loss(manifest, result.model_blob),
            included=[i.hotkey for i in result.tape.included],
            excluded=settlement_exclusions(result),
        )

    def seal(self, domain: str, body: dict[str, Any]) -> Envelope:
        expiry = self.service.beacon_round() + EXPIRY_MARGIN
        return seal(self.key, domain=domain, run_id=self.run_id, body=body, expiry_round=expiry)

    def rollback_step(self, manifest: RunManifest) -> int:
        """Rebase what the service's proven faults call for; returns the corrections
        posted (:mod:`hypertrain.aggregator.corrections`)."""
        todo = corrections.plan(self.service, self.store, self.run_id)
        if todo is None:
            return 0
        started = time.monotonic()
        fixed = rebase(todo.chain, todo.faulty, self.store)
        for item in fixed:
            body = MergeCorrection(
                supersedes_tape_sha256=item.supersedes.sha256(),
                faults=todo.cited(item.result.tape.round),
                tape=self.publish(manifest, item.result),
            )
            self.service.post_correction(
                self.seal("merge-correction", body.model_dump(mode="json"))
            )
            self._remember(item.result)
        if not fixed:
            return 0
        self.emit({
            "event": "rolled_back", "rounds": [c.result.tape.round for c in fixed],
            "faults": [f"{f.round}:{f.hotkey}" for f in todo.due],
            "model": fixed[-1].result.tape.new_model_sha256,
            "seconds": round(time.monotonic() - started, 3),
        })  # fmt: skip
        return len(fixed)

    def correct(self, manifest: RunManifest) -> int:
        """:meth:`rollback_step` when its backoff allows; a refusal or failure is an event
        (``correction_refused``), never an error of the poll, so the next round opens."""
        now = self.clock()
        if not self.retry.ready(now):
            return 0
        try:
            done = self.rollback_step(manifest)
        except (ValueError, OSError, httpx.HTTPError) as exc:
            wait = self.retry.refused(now)
            log.warning("correction refused: %s (next try in %.0f s)", exc, wait)
            self.emit({
                "event": "correction_refused", "status": getattr(exc, "status", 0),
                "code": getattr(exc, "code", ""), "detail": str(exc)[:500],
                "refusals": self.retry.refusals, "retry_in_s": wait,
            })  # fmt: skip
            return 0
        self.retry.succeeded()
        return done

    def publish_broadcast(self, result: MergeResult, index: int) -> dict[str, Any]:
        """Store the merge's broadcast (if the run broadcasts); the merge-tape fields naming it."""
        if result.broadcast_blob is None:
            return {}
        sha = self.store.put(result.broadcast_blob, kind="model", round=index)
        return {
            "broadcast_sha256": sha,
            "broadcast_url": self.store.url(sha),
            "broadcast_bytes": len(result.broadcast_blob),
        }

    def eval_loss(self, manifest: RunManifest, model_blob: bytes) -> float | None:
        """Held-out loss of a merged model, or None without a held-out batch."""
        if self.heldout is None:
            return None
        params = decode_model_blob(model_blob, manifest.model)
        return heldout_loss(params, manifest, self.heldout)

    def open_next(self, manifest: RunManifest, rounds: list[RoundSummary]) -> None:
        """Open round 0 with the genesis model, or the next round on the model the service
        names (where witnesses are required it waits for them: ``unwitnessed``)."""
        if not rounds:
            sha, url = genesis(manifest, self.store, self.genesis_model)
            self.service.open_round(self.run_id, sha, url)
        else:
            try:
                opened = self.service.open_round(self.run_id, None, None)
            except ServiceError as exc:
                if exc.code == "unwitnessed":  # the previous tape awaits its witnesses
                    self.emit({"event": "waiting", "round": len(rounds), "for": "witnesses"})
                    return
                if exc.code != "no_start_model":
                    raise
                detail_of = partial(self.service.round_detail, self.run_id)
                latest = chain.latest_model(detail_of, [r.round for r in rounds], manifest)
                opened = self.service.open_round(self.run_id, *latest)
            sha = verify_round_open(opened, manifest, len(rounds)).start_model_sha256
        self.emit({"event": "opened", "round": len(rounds), "phase": "train", "model": sha})

    def step(self, manifest: RunManifest, open_rounds: bool) -> int:
        """One poll: merge what waits for a merge, open the next round; returns merges done.
        A manifest that names no coordinator is refused (:class:`CoordinatorError`)."""
        coordinator_of(manifest)
        rounds = self.service.rounds(self.run_id)
        done = 0
        for summary in rounds:
            if summary.phase == "merge":
                try:
                    self.merge_round(manifest, summary.round)
                except UndecidedError as exc:  # an update may still arrive in time
                    self.emit({"event": "waiting", "round": summary.round,
                               "for": "upload_deadline", "detail": str(exc)[:500]})  # fmt: skip
                    continue
                done += 1
        corrected = self.correct(manifest)  # before the next round opens, never blocking it
        if open_rounds:
            rounds = self.service.rounds(self.run_id) if done or corrected else rounds
            ended = self.last_round is not None and len(rounds) > self.last_round
            if (not rounds or rounds[-1].phase in ("settle", "final")) and not ended:
                self.open_next(manifest, rounds)
            self.keep_start_model(rounds)  # the list read before any round opened here
        return done

    def keep_start_model(self, rounds: list[RoundSummary]) -> None:
        """Once per training round: the relay still holds the model it opened on (else no
        island could train it, nor any later round opened on the same model)."""
        last = rounds[-1] if rounds else None
        if last is None or last.phase != "train" or last.round == self.kept_round:
            return
        if last.start_model_sha256 and republish_missing(
            self.store, last.start_model_sha256, "model", last.round
        ):
            self.emit({"event": "republished", "round": last.round,
                       "model": last.start_model_sha256})  # fmt: skip
        self.kept_round = last.round


def follow(
    agg: Aggregator,
    *,
    open_rounds: bool,
    poll_s: float = 1.0,
    max_rounds: int | None = None,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """Poll until ``stop()`` or ``max_rounds`` merges; errors are logged and retried,
    except a run without a coordinator (:class:`CoordinatorError`), which is raised."""
    manifest = run_manifest(agg.service, agg.run_id, agg.coordinator)
    merged = 0
    while not stop() and (max_rounds is None or merged < max_rounds):
        try:
            merged += agg.step(manifest, open_rounds)
        except CoordinatorError:
            raise
        except (ValueError, OSError, httpx.HTTPError) as exc:
            log.warning("aggregator step failed: %s (retrying)", exc)
            agg.emit({"event": "error", "detail": str(exc)[:500]})
        time.sleep(poll_s)
    return merged
