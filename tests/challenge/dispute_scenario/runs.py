"""The scenario's service in its variants, and the fixtures ``service``, ``bonded`` and
``three``.

The service runs in process (FastAPI's ``TestClient``) on a beacon the test steps by hand and
a ledger fake that records what settlement pays, holds, burns and bonds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.settings import Settings
from hypertrain.protocol.honeypots import commitment
from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario.cast import (
    AUDITOR,
    HONEYPOTS,
    ISLANDS,
    OTHER_AUDITOR,
    REFEREED,
    RULES,
    RUN,
    THIRD_AUDITOR,
    addresses,
)
from tests.challenge.helpers import (
    AGGREGATOR,
    FakeLedger,
    SteppedBeacon,
    bearer,
    join_body,
    make_settings,
    manifest_doc,
    signed,
)


@dataclass
class Service:
    settings: Settings
    beacon: SteppedBeacon
    ledger: FakeLedger
    client: TestClient

    def tick(self, rounds: int = 1) -> None:
        self.beacon.round += rounds
        self.client.portal.call(_poll_beacon, self.client.app.state.service)  # type: ignore[union-attr,attr-defined]

    def post(self, path: str, key: Hotkey, domain: str, body: dict[str, Any]) -> Any:
        return self.client.post(path, json=signed(key, domain, body, run_id=RUN))


class Played(Protocol):
    """What the round builders use of a service: its HTTP client, signed posts, the beacon."""

    @property
    def client(self) -> Any: ...

    def tick(self, rounds: int = 1) -> None: ...

    def post(self, path: str, key: Hotkey, domain: str, body: dict[str, Any]) -> Any: ...


@contextlib.contextmanager
def running(svc: Service) -> Iterator[Service]:
    """``svc``'s service started (again, after a stop: its state directory is kept)."""
    app = create_app(svc.settings, beacon=svc.beacon, ledger=svc.ledger)
    with TestClient(app) as client:
        svc.client = client
        yield svc


@contextlib.contextmanager
def started(
    tmp_path: Path,
    doc: dict[str, Any],
    *,
    islands: Sequence[Hotkey] = ISLANDS,
    ledger: Any = None,
    **settings: Any,
) -> Iterator[Service]:
    """A service running ``doc`` with ``islands`` registered; ``settings`` replace the
    helpers' defaults (``make_settings``); ``ledger``: a real one instead of the fake."""
    values = make_settings(tmp_path, [k.ss58_address for k in islands], **settings)
    svc = Service(values, SteppedBeacon(), FakeLedger() if ledger is None else ledger, None)  # type: ignore[arg-type]
    with running(svc):
        r = svc.client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert r.status_code == 200, r.text
        yield svc


@contextlib.contextmanager
def joined_run(tmp_path: Path, doc: dict[str, Any], islands: Sequence[Hotkey]) -> Iterator[Service]:
    """A service running ``doc`` with every one of ``islands`` joined."""
    with started(tmp_path, doc, islands=islands) as svc:
        for key in islands:
            body = signed(key, "join", join_body(), doc["run_id"])
            joined = svc.client.post("/v1/join", json=body)
            assert joined.status_code == 200, joined.text
        yield svc


def carry_doc(run_id: str) -> dict[str, Any]:
    """``run_id`` at audit rate 1, one segment audited, under the ``carry`` state policy."""
    doc = manifest_doc(run_id, rate=1.0, segments=1)
    doc["inner"] = {**doc.get("inner", {}), "state_policy": "carry"}
    return doc


def dispute_doc(dispute: dict[str, Any], *, segments: int = 1, **audit: Any) -> dict[str, Any]:
    """The scenario's manifest: :data:`RUN` at audit rate 1 with ``segments`` audited per
    island, a 20-round audit window and the ``dispute`` section."""
    doc = manifest_doc(RUN, rate=1.0, segments=segments, **audit)
    doc["round"]["audit_window_rounds"] = 20
    doc["dispute"] = dispute
    return doc


@contextlib.contextmanager
def dispute_run(
    tmp_path: Path, *, bond: int = 0, dispute_window_rounds: int = 0, **settings: Any
) -> Iterator[Service]:
    """The ``service`` fixture's run: one audited segment, the referee, the honeypot list
    committed (revealed at round 0), disputes bonded with ``bond`` base units."""
    doc = dispute_doc({**REFEREED, "bond": bond})
    if dispute_window_rounds:
        doc["round"]["dispute_window_rounds"] = dispute_window_rounds
    doc["honeypots"] = {"commitment": commitment(HONEYPOTS), "reveal_round": 0}
    with started(tmp_path, doc, **settings) as svc:
        yield svc


@contextlib.contextmanager
def rules_run(
    tmp_path: Path, dispute: dict[str, Any], workers: tuple[Hotkey, ...] = ()
) -> Iterator[Service]:
    """Two audited segments, the ``dispute`` section, ``workers`` the listed auditors (none
    listed: every holder of the worker token audits)."""
    doc = dispute_doc(dispute, segments=2)
    with started(tmp_path, doc, worker_hotkeys=addresses(*workers)) as svc:
        yield svc


@contextlib.contextmanager
def jury_run(
    tmp_path: Path,
    dispute: dict[str, Any],
    workers: tuple[Hotkey, ...],
    *,
    segments: int = 2,
    name_aggregator: bool = True,
) -> Iterator[Service]:
    """:func:`rules_run` with the aggregator's key listed among the ``workers`` too (its
    tapes pass the list; it judges nothing) and, unless ``name_aggregator`` is false,
    named in ``HYPERTRAIN_AGGREGATOR_HOTKEYS``; ``segments`` audited per island."""
    named = addresses(AGGREGATOR) if name_aggregator else frozenset()
    listed = addresses(*workers, AGGREGATOR)
    doc = dispute_doc(dispute, segments=segments)
    with started(tmp_path, doc, worker_hotkeys=listed, aggregator_hotkeys=named) as svc:
        yield svc


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    with dispute_run(tmp_path) as svc:
        yield svc


@pytest.fixture
def bonded(tmp_path: Path) -> Iterator[Service]:
    """A run whose disputes carry a bond of 100 base units."""
    with dispute_run(tmp_path, bond=100) as svc:
        yield svc


@pytest.fixture
def three(tmp_path: Path) -> Iterator[Service]:
    """Three listed auditors and no referee: every verdict's jury is the other two (the
    aggregator is listed and named, and sits on no jury)."""
    auditors = (AUDITOR, OTHER_AUDITOR, THIRD_AUDITOR)
    with jury_run(tmp_path, {**RULES, "referees": []}, auditors) as svc:
        yield svc
