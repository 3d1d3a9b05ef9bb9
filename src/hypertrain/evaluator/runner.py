"""The evaluator loop: fetch the open cycle, score every model not yet scored, sign, post.

Model files are fetched from the relay the miner named and re-hashed on arrival;
the file list must hash to the revealed model hash. The whole download of a model has
one deadline derived from its declared size (:mod:`hypertrain.evaluator.download`), so
a server that trickles its bytes is that model's refusal, not a stalled loop, and models
are fetched cached first, then smallest first, and last the hotkeys whose latest download
failed (:meth:`Evaluator.fetch_order`), so a slow server delays few others. A fetched
model stays in the cache while the task lists it and is re-hashed before each later use
instead of fetched again.
A model that cannot be fetched, fails a spec check or does not load is *refused*: its
score carries the reason and an infinite loss on every page, so it can never win a
comparison, and the evaluator moves on to the next model. Nothing a submitter controls
can stop the loop.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hypertrain.api.competition import CompetitionClient
from hypertrain.api.errors import ServiceError
from hypertrain.competition.messages import (
    SCORE_DOMAIN,
    CompeteScore,
    CycleModel,
    CycleTask,
    encode_losses,
)
from hypertrain.competition.pool import PoolError, verified_pages
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError, model_hash
from hypertrain.evaluator.download import FetchLimits, fetch_files
from hypertrain.evaluator.sandbox import Limits, score_model
from hypertrain.evaluator.scorer import EvaluationError
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.errors import MerkleError
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.retry import Backoff
from hypertrain.rolekit import Emit, poll, role_events

log = logging.getLogger(__name__)
EXPIRY_MARGIN_ROUNDS = 50
_HEX64 = re.compile(r"[0-9a-f]{64}")


emit_json = role_events("evaluator")


@dataclass(frozen=True, slots=True)
class Evaluator:
    service: CompetitionClient
    key: Hotkey
    spec: CompetitionSpec
    cache_dir: Path
    determinism_sha256: str
    threads: int = 1
    limits: Limits = field(default_factory=Limits)
    fetch_limits: FetchLimits = field(default_factory=FetchLimits)
    # (cycle, model hash) -> (losses, refusal): a score computed once is posted again
    # after a failed post, never recomputed.
    results: dict[tuple[int, str], tuple[list[float], str]] = field(default_factory=dict)
    # hotkeys whose latest download failed (a deadline, a bad server): fetched last
    fetch_failed: set[str] = field(default_factory=set)

    def fetch(self, model: CycleModel) -> Path:
        """Download the model's files into the cache (hash-checked) and return the folder."""
        if model_hash(model.files) != model.model_sha256:
            raise SubmissionError("the revealed file list does not hash to the model hash")
        total = sum(f.size for f in model.files)
        if total > self.spec.architecture.max_bytes:
            raise SubmissionError(f"the model is {total} bytes, over the limit")
        folder = self.cache_dir / model.model_sha256
        if cached(folder, model):
            return folder  # kept from an earlier cycle, every file re-hashed
        partial = folder.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        fetch_files(model.base_url, model.files, partial, self.fetch_limits)
        shutil.rmtree(folder, ignore_errors=True)
        partial.rename(folder)
        return folder

    def pages(self, task: CycleTask) -> npt.NDArray[np.int64]:
        """The task's revealed pages, each checked against the spec's committed pool root."""
        try:
            return verified_pages(
                self.spec, task.pages, [p.tokens for p in task.revealed],
                [p.proof.proof() for p in task.revealed],
            )  # fmt: skip
        except (PoolError, MerkleError) as exc:
            raise EvaluationError(f"cycle {task.cycle}: {exc}; nothing scored") from None

    def losses(
        self, model: CycleModel, task: CycleTask, pages: npt.NDArray[np.int64]
    ) -> tuple[list[float], str]:
        """(page losses, refusal reason); a refused model has an infinite loss everywhere."""
        key = (task.cycle, model.model_sha256)
        if key not in self.results:
            self.results[key] = self._compute(model, task, pages)
        return self.results[key]

    def _compute(
        self, model: CycleModel, task: CycleTask, pages: npt.NDArray[np.int64]
    ) -> tuple[list[float], str]:
        try:
            directory = self._fetch_any(model)
            return score_model(directory, self.spec, pages, self.threads, self.limits), ""
        except SubmissionError as exc:  # a refused model is not kept
            shutil.rmtree(self.cache_dir / model.model_sha256, ignore_errors=True)
            return [math.inf] * len(task.pages), str(exc)[:1000]

    def prune(self, keep: set[str]) -> None:
        """Drop the cached models no longer in the task (only the folders this class names)."""
        if not self.cache_dir.is_dir():
            return
        for entry in self.cache_dir.iterdir():
            name = entry.name.removesuffix(".partial")
            if _HEX64.fullmatch(name) and (entry.name != name or name not in keep):
                shutil.rmtree(entry, ignore_errors=True)

    def _fetch_any(self, model: CycleModel) -> Path:
        """:meth:`fetch`, with every failure on the miner's inputs (a URL, a relay) a refusal;
        the hotkey of a failed download is fetched last from then on (:func:`fetch_order`)."""
        try:
            folder = self.fetch(model)
        except SubmissionError:
            self.fetch_failed.add(model.hotkey)
            raise
        except Exception as exc:  # a hostile base_url or relay answer: that model's refusal
            self.fetch_failed.add(model.hotkey)
            raise SubmissionError(f"the model's files could not be fetched: {exc}") from None
        self.fetch_failed.discard(model.hotkey)
        return folder

    def fetch_order(self, models: list[CycleModel]) -> list[CycleModel]:
        """The order a cycle's models are fetched in, so that a slow server delays as few
        models as it can: models already in the cache (no download), then the others by
        declared size, smallest first, and last every hotkey whose latest download failed.
        The order changes no score (each model is judged against its own deadline)."""

        def key(m: CycleModel) -> tuple[bool, bool, int, int]:
            failed = m.hotkey in self.fetch_failed
            kept = (self.cache_dir / m.model_sha256).is_dir()
            return failed, not kept, sum(f.size for f in m.files), m.commit_seq

        return sorted(models, key=key)

    def score(
        self, model: CycleModel, task: CycleTask, pages: npt.NDArray[np.int64]
    ) -> dict[str, Any]:
        losses, refused = self.losses(model, task, pages)
        now = self.service.beacon_round()  # after scoring: the expiry counts from the post
        body = CompeteScore(
            cycle=task.cycle,
            model_sha256=model.model_sha256,
            pages_key=task.pages_key,
            losses_f32=encode_losses(losses),
            determinism_sha256=self.determinism_sha256,
            refused=refused,
        )
        env = seal(
            self.key, domain=SCORE_DOMAIN, run_id=self.spec.competition_id,
            body=body.model_dump(), expiry_round=now + EXPIRY_MARGIN_ROUNDS,
        )  # fmt: skip
        self.service.post_score(env)
        return {"model_sha256": model.model_sha256, "refused": refused,
                "mean_loss": sum(losses) / len(losses)}  # fmt: skip


def cached(folder: Path, model: CycleModel) -> bool:
    """True when ``folder`` holds exactly the model's files, each of its size and hash."""
    if not folder.is_dir():
        return False
    if sorted(p.name for p in folder.iterdir()) != sorted(f.name for f in model.files):
        return False
    for f in model.files:
        path = folder / f.name
        if not path.is_file() or path.stat().st_size != f.size or _sha256(path) != f.sha256:
            return False
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def evaluate_open_cycle(evaluator: Evaluator, emit: Emit = emit_json) -> int:
    """Score every model of the open cycle this evaluator has not scored; returns the count."""
    task = evaluator.service.task(evaluator.spec.competition_id, evaluator.key.ss58_address)
    if task is None:
        return 0
    done = 0
    pages = evaluator.pages(task)
    for model in evaluator.fetch_order(task.listed()):
        if model.model_sha256 in task.scored:
            continue
        result = evaluator.score(model, task, pages)
        emit("scored", cycle=task.cycle, hotkey=model.hotkey, **result)
        done += 1
    evaluator.prune({m.model_sha256 for m in task.listed()})
    return done


class EvaluatorRefusedError(ValueError):
    """The service refuses this evaluator itself (credentials, not a passing failure)."""


FATAL_STATUSES = frozenset({401, 403})
RETRY = Backoff(attempts=1, first_delay_s=1.0)  # only its delays are used: 1, 2, 4, ... s


def follow(
    evaluator: Evaluator,
    *,
    poll_s: float = 1.0,
    backoff: Backoff = RETRY,
    max_delay_s: float = 60.0,
    stop: Callable[[], bool] = lambda: False,
    emit: Emit = emit_json,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Evaluate every cycle as it opens, until ``stop``.

    A failed call is retried with exponential backoff (``backoff.delay_s``, capped at
    ``max_delay_s``); scores already computed are kept and posted again, never
    recomputed. A refusal of the evaluator itself (401, 403) ends the loop with
    :class:`EvaluatorRefusedError`, since waiting cannot fix a wrong key or token.
    """

    def failed(exc: Exception, retry_in_s: float) -> None:
        if isinstance(exc, ServiceError) and exc.status in FATAL_STATUSES:
            raise EvaluatorRefusedError(str(exc)) from None
        emit("service_error", detail=str(exc), retry_in_s=retry_in_s)

    poll(
        lambda: evaluate_open_cycle(evaluator, emit),
        poll_s=poll_s,
        stop=stop,
        passing=(ServiceError, EvaluationError),
        on_error=failed,
        backoff=backoff,
        max_delay_s=max_delay_s,
        sleep=sleep,
    )
