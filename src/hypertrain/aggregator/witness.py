"""The tape witness: recompute every merged round and post a signed attestation.

``hypertrain aggregator witness`` runs under a hotkey of its own, which the challenge
service holds to the ``witness`` role (it signs no verdict or tape of the run and is no
island). It lives in the aggregator package because the recomputation it runs is the
aggregator's own merge (:func:`~hypertrain.aggregator.verify.verify_tape`, over
``merge``, ``screen``, ``aggregate`` and the outer step), which sits at the roles' level
and cannot move below it; the separation between the two is the key and its role, which
the service enforces, not the import graph.

For each round with a current merge (:func:`witness_round`) the witness

1. fetches the tape named by the signed ``merge-tape`` record from the relay
   (hash-checked) and checks the record against it: the fields settlement reads
   (``included``, ``excluded``, the model and outer-state hashes) must be the tape's;
2. checks the tape's inputs against the public round record: the run's manifest, the
   previous merge's outer state, the upload deadline availability is judged at
   (``updates_by_round``, from the round's audit selection:
   :mod:`~hypertrain.aggregator.availability`), every signed commit offered as a candidate or
   excluded at collection with its own update hash and tokens, an ``audit_mismatch``
   only where a verifiable non-``match`` verdict exists, an ``audit_pending`` only
   where the coordinator assigned an audit, ``bad_commit`` and ``wrong_round`` only
   where the island's signed commit says so, ``stale_update`` only for an update that a
   tape of an earlier round included (:func:`~hypertrain.aggregator.chain.merged_updates`),
   ``duplicate`` only for an island with a second signed commit in the round,
   ``rolled_back`` only for an island with a non-``match`` verdict or a fault a
   correction of the round cites (a screen's code at the collect stage, where
   ``verify_tape`` takes exclusions as inputs, is a difference of ``verify_tape``
   itself: :func:`~hypertrain.aggregator.verify.misstaged`);
3. recomputes the merge from the tape and the blobs (``verify_tape``) and checks that
   the published model, outer-state and broadcast blobs are the recomputed ones.

The previous outer state is the one of the merge the round's start model continues
(:func:`~hypertrain.aggregator.chain.previous_outer`), read from the earlier rounds'
*current* tapes. The witness reads a round's detail only while its current tape
(``tape_sha256`` in the rounds list) is one it has not attested; earlier rounds it has
read are kept for the chain only while the rounds list still names the tape it read
(:meth:`Witness._detail`): a rebase corrects rounds ``r`` and ``r + 1`` between two polls,
and ``r + 1``'s corrected tape continues ``r``'s corrected outer state, not the one the
witness first read. A step sees one listing of the chain: a round whose tape moved after
the list was read (:class:`~hypertrain.aggregator.errors.ChainMovedError`) ends the step
unattested, and the next step lists afresh.

The first difference found is the attestation's ``first_difference``; none, and the
witness agrees. A tape blob that cannot be fetched or parsed is a disagreement (the
round cannot be recomputed from public blobs); a relay that cannot be reached fails
the step, which is retried.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from hypertrain.aggregator import chain
from hypertrain.aggregator.availability import UndecidedError, updates_deadline
from hypertrain.aggregator.blobs import BlobSource
from hypertrain.aggregator.collect import audits
from hypertrain.aggregator.errors import AggregatorError, BlobError, ChainMovedError
from hypertrain.aggregator.records import commit_refusals, run_manifest
from hypertrain.aggregator.sketch import SketchCache
from hypertrain.aggregator.tape import Excluded, Tape, decode_tape
from hypertrain.aggregator.verify import verify_tape
from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail, RoundSummary
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import Commit, MergeCorrection, MergeTape, TapeAttestation

log = logging.getLogger(__name__)
Emit = Callable[[dict[str, Any]], None]
EXPIRY_MARGIN = 10


@dataclass(frozen=True)
class Finding:
    """A witness's word on one tape."""

    round: int
    tape_sha256: str
    first_difference: str | None

    @property
    def agrees(self) -> bool:
        return self.first_difference is None

    def body(self) -> TapeAttestation:
        return TapeAttestation(
            round=self.round,
            tape_sha256=self.tape_sha256,
            agrees=self.agrees,
            first_difference=None if self.agrees else (self.first_difference or "?")[:2048],
        )


def _differs(checks: list[tuple[str, object, object]]) -> str | None:
    """The first ``(path, public, tape)`` whose two values differ."""
    for path, public, taped in checks:
        if public != taped:
            return f"{path}: the public record says {public!r}, the tape {taped!r}"
    return None


def record_difference(record: MergeTape, tape: Tape) -> str | None:
    """The first field of the signed ``merge-tape`` record that is not the tape's."""
    return _differs([
        ("record.round", record.round, tape.round),
        ("record.start_model_sha256", record.start_model_sha256, tape.start_model_sha256),
        ("record.new_model_sha256", record.new_model_sha256, tape.new_model_sha256),
        ("record.outer_state_sha256", record.outer_state_sha256, tape.new_outer_state_sha256),
        ("record.included", record.included, [i.hotkey for i in tape.included]),
        ("record.excluded", dict(record.excluded), tape.settlement_exclusions()),
    ])  # fmt: skip


def _commits(detail: RoundDetail, manifest: RunManifest) -> dict[str, Commit]:
    """The round's first verifying commit of each island."""
    out: dict[str, Commit] = {}
    for signer, body in chain.signed_commits(detail, manifest, detail.round):
        out.setdefault(signer, body)
    return out


def inputs_difference(
    tape: Tape,
    detail: RoundDetail,
    manifest: RunManifest,
    previous_outer: str | None,
    merged: frozenset[str] = frozenset(),
) -> str | None:
    """The first input of the tape that the public round record does not support
    (``merged``: the update hashes earlier rounds' tapes included)."""
    found = _differs([
        ("tape.manifest_digest", manifest.digest(), tape.manifest_digest),
        ("tape.round", detail.round, tape.round),
        ("tape.prev_outer_state_sha256", previous_outer, tape.prev_outer_state_sha256),
        ("tape.updates_by_round", updates_deadline(detail), tape.updates_by_round),
        ("tape.candidates", sorted({e.signer for e in detail.commits}),
         sorted({c.hotkey for c in tape.candidates}
                | {e.hotkey for e in tape.excluded if e.stage == "collect"})),
    ])  # fmt: skip
    if found:
        return found
    commits = _commits(detail, manifest)
    for c in tape.candidates:
        body = commits.get(c.hotkey)
        if body is None or (body.update_sha256, body.tokens) != (c.update_sha256, c.tokens):
            return f"tape.candidates[{c.hotkey}]: not the island's signed commit"
    audited = audits(detail, manifest, detail.round)
    refusals = commit_refusals(detail, manifest, detail.round)
    copies = Counter(e.signer for e in detail.commits)
    cited = _cited_faults(detail)
    for e in tape.excluded:
        commit = commits.get(e.hotkey)  # stale by its signed update, not the tape's word
        sha = commit.update_sha256 if commit is not None else e.update_sha256
        public = Public(commit, e.hotkey in audited.faulty, e.hotkey in audited.assigned,
                        copies[e.hotkey], sha in merged, e.hotkey in cited,
                        refusals.get(e.hotkey, frozenset()))  # fmt: skip
        lie = _collect_lie(e, public, detail.round)
        if lie:
            return f"tape.excluded[{e.hotkey}]: {lie}"
    return None


@dataclass(frozen=True, slots=True)
class Public:
    """What the public record says of one excluded island."""

    commit: Commit | None  # its first verifying signed commit of the round
    faulty: bool  # a verifiable non-``match`` verdict of it exists
    assigned: bool  # the coordinator assigned it an audit
    copies: int  # its commits in the round record
    merged: bool  # an earlier round's tape included this update
    cited: bool = False  # a correction of the round cites a proven fault of it
    refusals: frozenset[str] = frozenset()  # codes its commits were refused with


def _cited_faults(detail: RoundDetail) -> set[str]:
    """Islands whose fault in this round a correction of the round cites (the service
    takes a correction's faults only once proven)."""
    out: set[str] = set()
    for env in detail.corrections:
        body = MergeCorrection.model_validate(env.body)
        out.update(f.hotkey for f in body.faults if f.round == detail.round)
    return out


def _collect_lie(e: Excluded, public: Public, index: int) -> str | None:
    """Why a collect-stage reason is not what the public record says (None: it may be)."""
    if e.reason == "rolled_back" and not (public.faulty or public.cited):
        return "rolled_back without a non-match verdict or a cited proven fault"
    if e.reason == "audit_mismatch" and not public.faulty:
        return "audit_mismatch without a non-match verdict"
    if e.reason == "stale_update" and not public.merged:
        return "stale_update, but no earlier round's tape included this update"
    if e.reason == "duplicate" and public.copies < 2:
        return "duplicate, but the island has one commit in the round"
    if e.reason == "audit_pending" and not public.assigned:
        return "audit_pending without an assigned audit"
    if e.reason in ("bad_commit", "wrong_round") and e.reason not in public.refusals:
        return f"{e.reason}, but no commit of it in round {index} was refused as such"
    return None


def _published(tape: Tape, blobs: BlobSource, model: bytes) -> str | None:
    """Whether the model blob the record points islands to is the recomputed one."""
    try:
        if blobs.get(tape.new_model_sha256) != model:
            return "model: the relay's model blob is not the recomputed one"
    except BlobError as exc:
        return f"model: {exc}"
    return None


def witness_round(
    detail: RoundDetail,
    manifest: RunManifest,
    previous_outer: str | None,
    blobs: BlobSource,
    merged: frozenset[str] = frozenset(),
    sketches: SketchCache | None = None,
) -> Finding | None:
    """Recompute the round's current tape; None when the round has no merge yet
    (``merged``: the update hashes earlier rounds' tapes included; ``sketches``: the run
    sketch cache a following witness keeps, so each public update is projected once)."""
    record = detail.current_merge()
    if record is None:
        return None
    try:
        tape = decode_tape(blobs.get(record.tape_sha256))
    except AggregatorError as exc:  # missing, wrong hash, not a tape: nobody can recompute it
        return Finding(detail.round, record.tape_sha256, f"tape: {exc}")
    diff = record_difference(record, tape) or inputs_difference(
        tape, detail, manifest, previous_outer, merged
    )
    found = diff or _recompute(record, tape, blobs, sketches)
    return Finding(detail.round, record.tape_sha256, found)


def _recompute(
    record: MergeTape, tape: Tape, blobs: BlobSource, sketches: SketchCache | None
) -> str | None:
    """``verify_tape``, then the published model and broadcast against the recomputed."""
    try:
        report = verify_tape(tape, blobs, sketches)
    except AggregatorError as exc:
        return f"tape: the merge cannot be recomputed: {exc}"
    found = report.first_difference or _published(tape, blobs, report.recomputed.model_blob)
    broadcast = report.recomputed.broadcast_blob
    sha = hashlib.sha256(broadcast).hexdigest() if broadcast is not None else None
    if found is None and record.broadcast_sha256 != sha:
        found = f"record.broadcast_sha256: {record.broadcast_sha256!r}, recomputed {sha!r}"
    return found


def current_tape(detail: RoundDetail) -> str | None:
    """The hash of the round's current tape (its latest correction's, else its merge's)."""
    merged = detail.current_merge()
    return None if merged is None else merged.tape_sha256


def pending(rounds: list[RoundSummary], done: set[tuple[int, str]]) -> list[RoundSummary]:
    """The rounds with a current tape this witness has not attested, newest first."""
    open_tapes = [
        r for r in rounds
        if r.phase in ("settle", "final") and r.tape_sha256 is not None  # a tape is in
        and (r.round, r.tape_sha256) not in done
    ]  # fmt: skip
    return sorted(open_tapes, key=lambda r: r.round, reverse=True)


@dataclass
class Witness:
    """One witness key following one run."""

    service: ChallengeClient
    blobs: BlobSource
    key: Hotkey
    run_id: str
    emit: Emit = field(default=lambda event: None)
    done: set[tuple[int, str]] = field(default_factory=set)  # (round, tape) attested

    details: dict[int, RoundDetail] = field(default_factory=dict)  # rounds read, by round
    heads: dict[int, str | None] = field(default_factory=dict)  # round -> current tape, as listed
    coordinator: str | None = None  # pinned coordinator SS58 (None: the manifest's own)
    # every public update projected once for this witness's life, not once per tape (a
    # fresh cache per tape re-read the whole run's updates: a long run slowed every round)
    sketches: SketchCache | None = None
    merged_memo: chain.MergedMemo = field(default_factory=dict)  # each round verified once

    def step(self, manifest: RunManifest) -> int:
        """Attest the newest current tape of the run not attested yet (0 or 1 posted).

        Newest first, one per step: the newest merged round is the one the next round
        waits on, so a witness with a backlog (a slow machine, many rounds) clears the
        chain's head before it works through older rounds, which only their pay waits
        on. Only rounds whose current tape is not attested by this key are read afresh."""
        rounds = self.service.rounds(self.run_id)
        self.heads = {r.round: r.tape_sha256 for r in rounds}
        for summary in pending(rounds, self.done):
            try:
                detail = self._read(summary.round)
                if self._attested(detail) & {(summary.round, summary.tape_sha256)}:
                    self.done.add((summary.round, str(summary.tape_sha256)))
                    continue
                posted = self._attest(detail, manifest)
            except UndecidedError as exc:  # the relay's clock is not past the deadline yet
                self.emit({"event": "waiting", "round": summary.round,
                           "for": "upload_deadline", "detail": str(exc)[:500]})  # fmt: skip
                continue
            except ChainMovedError as exc:  # a correction landed: list the chain afresh
                self.emit({"event": "waiting", "round": summary.round, "for": "chain",
                           "detail": str(exc)[:500]})  # fmt: skip
                return 0
            if posted:
                return posted
        return 0

    def _read(self, index: int) -> RoundDetail:
        """The round's detail, read now; :class:`ChainMovedError` when its current tape is not
        the one this step's rounds list named."""
        detail = self.service.round_detail(self.run_id, index)
        self.details[index] = detail
        if current_tape(detail) != self.heads.get(index):
            raise ChainMovedError(
                f"round {index}'s current tape is {current_tape(detail)}, listed as"
                f" {self.heads.get(index)}"
            )
        return detail

    def _attested(self, detail: RoundDetail) -> set[tuple[int, str]]:
        mine = detail.witnesses.attestations if detail.witnesses else []
        me = self.key.ss58_address
        return {(detail.round, a.tape_sha256) for a in mine if a.witness == me}

    def _detail(self, index: int) -> RoundDetail:
        """An earlier round's detail as it stands (for the chain and merged updates): as
        last read while the rounds list names the same current tape, else read afresh."""
        kept = self.details.get(index)
        if kept is not None and current_tape(kept) == self.heads.get(index):
            return kept
        return self._read(index)

    def _attest(self, detail: RoundDetail, manifest: RunManifest) -> int:
        index = detail.round
        previous = chain.previous_outer(self._detail, index, manifest)
        merged = chain.merged_updates(self._detail, index, manifest, self.merged_memo)
        if self.sketches is None:
            self.sketches = SketchCache(self.run_id)
        finding = witness_round(detail, manifest, previous, self.blobs, merged, self.sketches)
        if finding is None:
            return 0
        expiry = self.service.beacon_round() + EXPIRY_MARGIN
        env = seal(self.key, domain="tape-attestation", run_id=self.run_id,
                   body=finding.body().model_dump(mode="json"), expiry_round=expiry)  # fmt: skip
        try:
            answer = self.service.post_attestation(env)
        except ServiceError as exc:
            if exc.code != "superseded":  # a correction came in: the next step attests it
                raise
            return 0
        self.done.add((finding.round, finding.tape_sha256))
        self.emit({
            "event": "attested", "round": finding.round, "tape": finding.tape_sha256,
            "agrees": finding.agrees, "first_difference": finding.first_difference,
            "status": answer.status,
        })  # fmt: skip
        return 1


def follow(
    witness: Witness, *, poll_s: float = 1.0, stop: Callable[[], bool] = lambda: False
) -> int:
    """Poll until ``stop()``; errors are logged and retried. Returns the attestations."""
    manifest = run_manifest(witness.service, witness.run_id, witness.coordinator)
    posted = 0
    while not stop():
        try:
            posted += witness.step(manifest)
        except (ValueError, OSError, httpx.HTTPError) as exc:
            log.warning("witness step failed: %s (retrying)", exc)
            witness.emit({"event": "error", "detail": str(exc)[:500]})
        time.sleep(poll_s)
    return posted
