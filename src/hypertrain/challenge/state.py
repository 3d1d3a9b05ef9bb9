"""The service's live state and the envelope check every signed route shares.

:class:`ServiceState` bundles the database connection, settings, metagraph view,
beacon and ledger, and the reader of a run's stored manifest (the rounds' storage owns the
runs table and sits above the state, so the app passes the reader in). Replay protection
is a table in the same database (one set per run), written in the same transaction as the
message it guards.

Nothing touches the database or the ledger on the event loop: routes are plain
``def`` functions that FastAPI runs in its thread pool, each holding
:attr:`ServiceState.lock` (the writer lock, so one connection serves one request's
transaction at a time), and the background beacon and metagraph steps run in a worker
thread under the same lock (:meth:`ServiceState.offload`). An ``fsync`` of a
settlement therefore delays other writers, never the loop or a cached ``get_weights``
(which reads through its own connection, :attr:`ServiceState.reader`).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar, cast

from pydantic import BaseModel, ValidationError

from hypertrain.api.models import BeaconHealth
from hypertrain.challenge import database
from hypertrain.challenge.errors import (
    AuthError,
    ChallengeError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    UnavailableError,
)
from hypertrain.challenge.metagraph import MetagraphView
from hypertrain.challenge.ports import BeaconRound, BeaconSource, Books, LedgerPort
from hypertrain.challenge.settings import Settings
from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.envelope import Envelope, VerifiedEnvelope, open_envelope, seal
from hypertrain.protocol.errors import EnvelopeError
from hypertrain.protocol.manifest import LayoutSpec, RunManifest
from hypertrain.protocol.sqlite import write_generation

BodyT = TypeVar("BodyT", bound=BaseModel)
T = TypeVar("T")
P = ParamSpec("P")
# Envelopes the coordinator signs stay valid for this many beacon rounds (~1 year at 3 s).
COORDINATOR_EXPIRY_ROUNDS = 10_000_000
# A signed message may not stay valid for longer than this many beacon rounds from now
# (about 3.5 days at quicknet's 3 s): its nonce is pruned once it expires.
MAX_EXPIRY_HORIZON_ROUNDS = 100_000
# /health reports the beacon as lagging when the verified round is this far behind.
BEACON_LAG_ROUNDS = 2
# Seconds per round of a beacon source that names no period (quicknet's).
QUICKNET_PERIOD_S = 3


@dataclass
class ServiceState:
    settings: Settings
    conn: sqlite3.Connection
    metagraph: MetagraphView
    beacon: BeaconSource
    ledger: LedgerPort
    # run id -> the run's manifest JSON as stored (None: no such run)
    read_manifest: Callable[[sqlite3.Connection, str], str | None]
    current: BeaconRound | None = None
    reader: sqlite3.Connection | None = None  # read-only lookups that need no lock
    lock: threading.RLock = field(default_factory=threading.RLock)
    counters: dict[str, int] = field(default_factory=dict)
    _manifests: dict[str, RunManifest] = field(default_factory=dict)
    _rosters: dict[tuple[str, int], frozenset[str]] = field(default_factory=dict)
    _layouts: dict[tuple[str, int], dict[str, LayoutSpec]] = field(default_factory=dict)
    _memos: dict[tuple[str, str], tuple[tuple[int, int], object]] = field(default_factory=dict)

    async def offload(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``fn`` in a worker thread holding the writer lock (never on the loop)."""

        def locked() -> T:
            with self.lock:
                return fn(*args, **kwargs)

        return await asyncio.to_thread(locked)

    def memo(self, name: str, run_id: str, read: Callable[[], T]) -> T:
        """``read()``, a pure read of the database, kept until the database's next write.

        Polls between two writes (the roles poll the rounds every half second) then cost
        nothing, and the answer is the one a fresh read gives: any committed write, by
        this connection or another, changes :func:`write_generation`. Inside a write
        transaction nothing is kept (its rows may roll back). One ``name`` per read.
        """
        with self.lock:
            generation = write_generation(self.conn)
            kept = self._memos.get((name, run_id))
            if generation is not None and kept is not None and kept[0] == generation:
                return cast(T, kept[1])
            value = read()
            if generation is not None and write_generation(self.conn) == generation:
                self._memos[(name, run_id)] = (generation, value)
            return value

    @property
    def coordinator(self) -> str:
        return self.settings.coordinator_key.ss58_address

    def roster_of(self, run_id: str, index: int, open_envelope: str) -> frozenset[str]:
        """The round's roster (fixed at open), parsed once per round."""
        key = (run_id, index)
        roster = self._rosters.get(key)
        if roster is None:
            roster = frozenset(loads(open_envelope)["body"]["roster"])
            self._rosters[key] = roster
        return roster

    def layout_of(self, run_id: str, index: int, open_envelope: str, hotkey: str) -> LayoutSpec:
        """The layout ``hotkey`` was opened with in a round (the run's default if unnamed)."""
        key = (run_id, index)
        layouts = self._layouts.get(key)
        if layouts is None:
            raw = loads(open_envelope)["body"].get("layouts", {})
            layouts = {h: LayoutSpec.model_validate(v) for h, v in raw.items()}
            self._layouts[key] = layouts
        return layouts.get(hotkey, self.manifest(run_id).round.layout)

    def current_round(self) -> int:
        if self.current is None:
            raise UnavailableError("no verified beacon round yet", code="no_beacon")
        return self.current.round

    def due_round(self) -> int:
        """The beacon round due by this service's own clock, never behind the verified one.

        drand rounds are a fixed function of time (genesis + period), so a round may
        already be public elsewhere before this service fetched and verified it. Every
        deadline check uses this round: a lagging beacon closes windows, never keeps
        them open. A source without a schedule (a hand-stepped test beacon) gives the
        verified round.
        """
        now = self.current_round()
        schedule = getattr(self.beacon, "due_round", None)
        if schedule is None:
            return now
        try:
            return max(now, int(schedule()))
        except (ValueError, OverflowError) as exc:  # no clock: refuse, never judge by the poll
            raise UnavailableError(f"the beacon schedule failed: {exc}", code="no_clock") from exc

    def beacon_period_s(self) -> int:
        """Seconds per beacon round: the chain's period, or quicknet's 3 s for a source
        without one (a hand-stepped test beacon)."""
        period = getattr(self.beacon, "period_s", None)
        return int(period()) if period is not None else QUICKNET_PERIOD_S

    def beacon_status(self) -> BeaconHealth:
        """Verified vs due round, for /health and the dashboard (lagging: behind by > 2)."""
        verified = self.current.round if self.current else None
        try:
            due = self.due_round() if self.current else None
        except UnavailableError:
            due = None  # no schedule: reported as lagging (every deadline check refuses)
        lag = (due - verified) if due is not None and verified is not None else None
        return BeaconHealth(
            verified_round=verified,
            due_round=due,
            lag_rounds=lag,
            lagging=due is None or (lag is not None and lag > BEACON_LAG_ROUNDS),
        )

    def books(self) -> Books:
        """The pieces settlement books with (:class:`~hypertrain.challenge.ports.Books`)."""
        return Books(self.conn, self.ledger, self.metagraph, self.settings, self.due_round)

    def epoch_now(self, what: str) -> int:
        """The metagraph epoch every reward and bond entry is booked at (never a fallback)."""
        return self.metagraph.epoch_now(what)

    def count(self, name: str, by: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + by

    def manifest(self, run_id: str) -> RunManifest:
        cached = self._manifests.get(run_id)
        if cached is not None:
            return cached
        text = self.read_manifest(self.conn, run_id)
        if text is None:
            raise NotFoundError(f"run {run_id!r} does not exist", code="unknown_run")
        manifest = RunManifest.model_validate_json(text)
        self._manifests[run_id] = manifest
        return manifest

    def sign(self, run_id: str, domain: str, body: BaseModel) -> Envelope:
        """An envelope signed by the coordinator key."""
        return seal(
            self.settings.coordinator_key,
            domain=domain,
            run_id=run_id,
            body=body.model_dump(mode="json"),
            expiry_round=(self.current.round if self.current else 0) + COORDINATOR_EXPIRY_ROUNDS,
        )

    def open_signed(
        self,
        env: Envelope,
        domain: str,
        model: type[BodyT],
        *,
        registered: bool,
        allowed: frozenset[str] | None = None,
    ) -> tuple[VerifiedEnvelope, BodyT]:
        """Verify an envelope for a known run; the nonce is burned later by :meth:`burn`."""
        self.manifest(env.run_id)
        return self.verify_signed(env, domain, model, registered=registered, allowed=allowed)

    def verify_signed(
        self,
        env: Envelope,
        domain: str,
        model: type[BodyT],
        *,
        registered: bool,
        allowed: frozenset[str] | None = None,
    ) -> tuple[VerifiedEnvelope, BodyT]:
        """Expiry horizon, signature, registration, allowed signer, body and unused nonce
        (the caller has checked that ``env.run_id`` names a run or a competition)."""
        now = self.due_round()
        if env.expiry_round > now + MAX_EXPIRY_HORIZON_ROUNDS:
            raise ChallengeError(
                f"expiry round {env.expiry_round} is more than {MAX_EXPIRY_HORIZON_ROUNDS}"
                f" beacon rounds after the current round {now}",
                code="expiry_too_far",
            )
        try:
            verified = open_envelope(
                env,
                domain=domain,
                current_round=now,
                is_registered=self.metagraph.is_registered if registered else None,
            )
        except EnvelopeError as exc:
            raise _envelope_refusal(exc) from None
        if allowed and verified.signer not in allowed:
            raise ForbiddenError(f"{verified.signer} {_not_listed(domain)}")
        try:
            body = model.model_validate(verified.body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            raise ChallengeError(f"body.{where}: {first['msg']}", code="bad_body") from None
        if database.nonce_used(self.conn, env.run_id, env.signer, env.nonce):
            raise ConflictError(f"nonce {env.nonce!r} was already used", code="replayed")
        return verified, body

    def burn(self, env: Envelope) -> None:
        """Record the envelope's nonce in the run's replay set; call inside the write txn."""
        try:
            database.burn_nonce(self.conn, env.run_id, env.signer, env.nonce, env.expiry_round)
        except sqlite3.IntegrityError:
            raise ConflictError(
                f"nonce {env.nonce!r} from {env.signer} was already used", code="replayed"
            ) from None

    def prune_nonces(self) -> int:
        """Forget nonces of expired envelopes (open_envelope refuses those anyway)."""
        return database.prune_nonces(self.conn, self.current_round())

    def close(self) -> None:
        with self.lock:
            self.conn.close()
            if self.reader is not None:
                self.reader.close()


def _envelope_refusal(exc: EnvelopeError) -> ChallengeError:
    if exc.reason == "unknown_signer":
        return ForbiddenError(exc.detail, code="unregistered")
    if exc.reason == "bad_signature":
        return AuthError(exc.detail, code="bad_signature")
    if exc.reason == "replayed":
        return ConflictError(exc.detail, code="replayed")
    return ChallengeError(exc.detail, code=exc.reason)


def dumps(value: Any) -> str:
    """Canonical JSON text for storage (what was signed is stored as signed)."""
    return canonical_bytes(value).decode("utf-8")


def quick_dumps(value: Any) -> str:
    """Compact sorted JSON for derived, unsigned records (cheaper than JCS on hot paths)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def loads(text: str) -> Any:
    return json.loads(text)


def _not_listed(domain: str) -> str:
    """Why a signer off the operator's key list is refused, naming that list."""
    if domain == "tape-attestation":
        return "is not on the witness list (HYPERTRAIN_WITNESS_HOTKEYS)"
    return "is not an allowed worker key (HYPERTRAIN_WORKER_HOTKEYS)"
