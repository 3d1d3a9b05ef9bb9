"""The worker's half of the admission challenge: recompute the reference, post it.

For every answered challenge of a device class this worker can compute (its own, by
default), run the self-check workload with the challenge's seed, recompute the memory
proof's sampled (device, query) answers (the service names the pairs, drawn from a
beacon round after the answer, and the island's answers to them), and post a signed
``admission-check`` carrying both. The service admits the island only if every one of
its devices answered the reference hash and every sampled memory answer matches.

What one check may cost the worker is bounded before the island has shown anything:

* the memory check builds each sampled table only as far as the ladder's next rung
  needs and stops at the first answer that differs from the island's
  (:func:`hypertrain.trainer.memproof.check_device`), so refusing an island that built
  nothing costs the smallest rung; the worker then posts a typed refusal;
* a check that would build more than ``max_entries`` entries is refused
  (``check_budget``) before anything is built; any exception computing a check on the
  island's bytes is that island's refusal (``check_failed``), never the pass's;
* a pass checks the cheapest challenges first and starts none once ``pass_entries``
  entries are spent, so an expensive claim waits for a later pass instead of holding
  an honest join behind it;
* under ``--follow`` the passes run in their own thread (:class:`AdmissionWorker`), so
  no check holds the audits or the dispute answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import torch

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import JoinAnswer, PendingAdmission
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.memproof import table_shape
from hypertrain.protocol.messages import AdmissionCheck, CheckRefusal, MemoryCheck
from hypertrain.rolekit import Emit
from hypertrain.trainer.memproof import CheckBudgetError, check_answers, check_device
from hypertrain.trainer.selfcheck import SelfcheckConfig, device_class, workload_hash

# Entries (8 bytes each) one check may build: 256 GiB, above every default class cap.
MAX_CHECK_ENTRIES: Final = 1 << 35
# Entries a pass may spend before it starts no further check (the rest wait a pass).
PASS_ENTRIES: Final = 1 << 33


@dataclass(frozen=True, slots=True)
class CheckWork:
    """What one admission check cost the worker and how it ended."""

    hotkey: str
    entries_built: int
    refusal: CheckRefusal | None
    answer: JoinAnswer | None  # the service's answer (None: the post failed)


@dataclass(frozen=True, slots=True)
class _Memory:
    checks: list[MemoryCheck]
    refusal: CheckRefusal | None
    detail: str
    entries_built: int


def reference_hash(seed: int, steps: int, device: torch.device) -> str:
    return workload_hash(device, SelfcheckConfig(seed=seed, steps=steps))


def _by_device(item: PendingAdmission) -> dict[int, dict[int, str]]:
    """The sample grouped by device: query -> the island's answer ("" when not given)."""
    answers = item.memory_answers or [""] * len(item.memory_sample)
    grouped: dict[int, dict[int, str]] = {}
    for (index, query), answer in zip(item.memory_sample, answers, strict=True):
        grouped.setdefault(index, {})[query] = answer
    return grouped


def memory_checks(item: PendingAdmission, device: torch.device) -> list[MemoryCheck]:
    """The sampled answers, all of them (no early stop), each device's table built once
    as far as its sampled queries read (integer arithmetic: any device computes the
    island's bytes)."""
    assert item.seed is not None
    out = []
    for index, expected in sorted(_by_device(item).items()):
        queries = sorted(expected)
        answers = check_answers(item.seed, index, item.memory_claims[index], queries, device)
        out += [
            MemoryCheck(device=index, query=q, answer=a)
            for q, a in zip(queries, answers, strict=True)
        ]
    return out


def _memory(item: PendingAdmission, device: torch.device, max_entries: int) -> _Memory:
    """The sampled answers, cheapest rung first, stopping at the first that differs."""
    assert item.seed is not None
    checks: list[MemoryCheck] = []
    spent = 0
    for index, expected in sorted(_by_device(item).items()):
        claim = item.memory_claims[index]
        result = check_device(item.seed, index, claim, expected, device, max_entries - spent)
        spent += result.entries_built
        checks += [MemoryCheck(device=index, query=q, answer=a) for q, a in result.answers.items()]
        if result.wrong_query is not None:
            detail = f"device {index} query {result.wrong_query} differs from its table"
            return _Memory(checks, "memory_mismatch", detail, spent)
    checks.sort(key=lambda m: (m.device, m.query))
    return _Memory(checks, None, "", spent)


def check_cost(item: PendingAdmission) -> int:
    """The most entries checking ``item`` can build: its sampled devices' tables."""
    try:
        return sum(table_shape(item.memory_claims[i]).entries for i in _by_device(item))
    except (ValueError, IndexError):
        return 0  # a sample the worker cannot size is refused at once (check_failed)


def _one(item: PendingAdmission, device: torch.device, max_entries: int) -> tuple[str, _Memory]:
    """The reference hash and the memory check, or a typed refusal; never raises."""
    assert item.seed is not None
    try:
        reference = reference_hash(item.seed, item.workload_steps, device)
        return reference, _memory(item, device, max_entries)
    except CheckBudgetError as exc:
        return "00" * 32, _Memory([], "check_budget", str(exc)[:500], 0)
    except Exception as exc:  # any failure on the island's bytes is its refusal
        return "00" * 32, _Memory([], "check_failed", f"{type(exc).__name__}: {exc}"[:500], 0)


def check_admissions(
    service: ChallengeClient,
    key: Hotkey,
    run_id: str,
    *,
    device: torch.device | None = None,
    classes: frozenset[str] | None = None,
    emit: Emit | None = None,
    expiry_margin: int = 50,
    max_entries: int = MAX_CHECK_ENTRIES,
    pass_entries: int = PASS_ENTRIES,
    work: list[CheckWork] | None = None,
) -> list[JoinAnswer]:
    """Post a reference (or a typed refusal) for each answered challenge of ``classes``
    (default: this device's class), cheapest first, until ``pass_entries`` are spent;
    returns the service's answers and appends each check's cost to ``work``. One bad
    entry never stops the rest."""
    device = device or torch.device("cpu")
    classes = classes if classes is not None else frozenset({device_class(device)})
    items = [i for i in service.admissions(run_id) if i.device_class in classes and i.seed]
    answers = []
    spent = 0
    for item in sorted(items, key=lambda i: (check_cost(i), i.hotkey)):
        if spent >= pass_entries:
            break  # the rest wait for the next pass
        reference, memory = _one(item, device, max_entries)
        spent += memory.entries_built
        answer = _post(service, key, run_id, item, reference, memory, expiry_margin, emit)
        if answer is not None:
            answers.append(answer)
        if work is not None:
            work.append(CheckWork(item.hotkey, memory.entries_built, memory.refusal, answer))
    return answers


def _post(
    service: ChallengeClient,
    key: Hotkey,
    run_id: str,
    item: PendingAdmission,
    reference: str,
    memory: _Memory,
    expiry_margin: int,
    emit: Emit | None,
) -> JoinAnswer | None:
    """Sign and post one check; a refused post is reported, never raised."""
    try:
        body = AdmissionCheck(
            hotkey=item.hotkey,
            seed_beacon_round=item.seed_beacon_round,
            reference_hash=reference,
            memory=memory.checks,
            refusal=memory.refusal,
            detail=memory.detail,
        )
        env = seal(
            key,
            domain="admission-check",
            run_id=run_id,
            body=body.model_dump(mode="json"),
            expiry_round=service.beacon_round() + expiry_margin,
        )
        return service.admission_check(env)
    except (ServiceError, ValueError, KeyError, TypeError) as exc:
        if emit is not None:
            emit("error", admission=item.hotkey, detail=str(exc)[:500])
        return None


class AdmissionWorker:
    """Admission passes in their own thread, so the audit and dispute loop never waits for
    one (a check of a large claim builds its table for minutes).

    ``run_pass`` is one pass (:func:`check_admissions` with the auditor's arguments); an
    exception that ``fatal`` names (the service refusing this worker itself) stops the
    thread and is kept in :attr:`failure` for the caller's loop to raise; any other is
    reported and the next pass starts ``poll_s`` later."""

    def __init__(
        self,
        run_pass: Callable[[], object],
        *,
        poll_s: float,
        emit: Emit,
        fatal: Callable[[Exception], bool],
    ) -> None:
        self._run_pass = run_pass
        self._poll_s = max(poll_s, 0.05)  # a pass polls the service: never a busy loop
        self._emit = emit
        self._fatal = fatal
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="admissions", daemon=True)
        self.failure: Exception | None = None
        self.passes = 0

    def start(self) -> AdmissionWorker:
        self._thread.start()
        return self

    def _loop(self) -> None:
        """Pass after pass (the first at once, whenever ``close`` comes)."""
        while True:
            try:
                self._run_pass()
            except Exception as exc:
                if self._fatal(exc):
                    self.failure = exc
                    return
                self._emit("error", detail=f"admissions: {type(exc).__name__}: {exc}"[:500])
            self.passes += 1
            if self._stop.wait(self._poll_s):
                return

    def close(self) -> None:
        """Start no further pass and wait for the one running to end."""
        self._stop.set()
        self._thread.join()
