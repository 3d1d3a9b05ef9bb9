"""The service's live state and the envelope check every signed route shares.

:class:`ServiceState` bundles the database connection, settings, metagraph view,
beacon, ledger and per-run replay stores. All mutation happens on the event loop
thread (routes are ``async`` and do their short SQLite work inline), so requests
are serialised without locks; slow calls (beacon, ledger) go to worker threads.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hypertrain.challenge.errors import (
    AuthError,
    ChallengeError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    UnavailableError,
)
from hypertrain.challenge.metagraph import MetagraphView
from hypertrain.challenge.ports import BeaconRound, BeaconSource, LedgerPort
from hypertrain.challenge.settings import Settings
from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.envelope import Envelope, VerifiedEnvelope, open_envelope, seal
from hypertrain.protocol.errors import EnvelopeError
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.replay import ReplayStore

BodyT = TypeVar("BodyT", bound=BaseModel)
# Envelopes the coordinator signs stay valid for this many beacon rounds (~1 year at 3 s).
COORDINATOR_EXPIRY_ROUNDS = 10_000_000


@dataclass
class ServiceState:
    settings: Settings
    conn: sqlite3.Connection
    metagraph: MetagraphView
    beacon: BeaconSource
    ledger: LedgerPort
    current: BeaconRound | None = None
    counters: dict[str, int] = field(default_factory=dict)
    _replay: dict[str, ReplayStore] = field(default_factory=dict)
    _manifests: dict[str, RunManifest] = field(default_factory=dict)

    @property
    def coordinator(self) -> str:
        return self.settings.coordinator_key.ss58_address

    def current_round(self) -> int:
        if self.current is None:
            raise UnavailableError("no verified beacon round yet", code="no_beacon")
        return self.current.round

    def count(self, name: str, by: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + by

    def manifest(self, run_id: str) -> RunManifest:
        cached = self._manifests.get(run_id)
        if cached is not None:
            return cached
        row = self.conn.execute(
            "SELECT manifest_json FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"run {run_id!r} does not exist", code="unknown_run")
        manifest = RunManifest.model_validate_json(row["manifest_json"])
        self._manifests[run_id] = manifest
        return manifest

    def replay(self, run_id: str) -> ReplayStore:
        store = self._replay.get(run_id)
        if store is None:
            directory = self.settings.state_dir / "replay"
            directory.mkdir(parents=True, exist_ok=True)
            store = ReplayStore(directory / f"{run_id}.sqlite")
            self._replay[run_id] = store
        return store

    def sign(self, run_id: str, domain: str, body: dict[str, Any]) -> Envelope:
        """An envelope signed by the coordinator key."""
        return seal(
            self.settings.coordinator_key,
            domain=domain,
            run_id=run_id,
            body=body,
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
        """Verify an envelope and its body (not yet burning its nonce: see :meth:`burn`)."""
        self.manifest(env.run_id)
        now = self.current_round()
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
            raise ForbiddenError(f"{verified.signer} is not an allowed worker key")
        try:
            body = model.model_validate(verified.body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            raise ChallengeError(f"body.{where}: {first['msg']}", code="bad_body") from None
        if self.replay(env.run_id).seen(env.signer, env.nonce):
            raise ConflictError(f"nonce {env.nonce!r} was already used", code="replayed")
        return verified, body

    def burn(self, env: Envelope) -> None:
        """Record the envelope's nonce; call after every check passed, before writing."""
        try:
            self.replay(env.run_id).record(env.signer, env.nonce, env.expiry_round)
        except EnvelopeError as exc:
            raise _envelope_refusal(exc) from None

    def close(self) -> None:
        for store in self._replay.values():
            store.close()
        self.conn.close()


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


def loads(text: str) -> Any:
    return json.loads(text)
