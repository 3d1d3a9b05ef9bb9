"""The dispute scenario: the run every dispute test plays on the real service, and its builders.

The challenge service runs in process (FastAPI's ``TestClient``) on a beacon the test steps
by hand (:class:`~tests.challenge.helpers.SteppedBeacon`) and a ledger fake that records what
settlement pays, holds, burns and bonds. Run :data:`RUN` has two islands (:data:`ISLANDS`)
that commit the checkpoint tree of :mod:`tests.challenge.disputeplay`, auditors that sign
verdicts (:data:`AUDITOR`, :data:`OTHER_AUDITOR`, :data:`THIRD_AUDITOR`), a referee and the
aggregator of :mod:`tests.challenge.helpers`, which signs the merge tapes.

The builders, bottom-up:

* a service: :func:`started` (any manifest), :func:`joined_run` (islands joined),
  :func:`dispute_run` (the ``service`` and ``bonded`` fixtures' run: a referee and the
  honeypot list), :func:`rules_run` (listed auditors, the rules of :data:`RULES`) and
  :func:`jury_run` (the same with the aggregator listed and named);
* round 0: :func:`commit_round_0`, then :func:`to_verdict` (island 0 judged a mismatch) or
  :func:`verdict_of_check` (a mismatch of one check);
* verdicts: :func:`assignment`, :func:`post_verdict`, :func:`verdict_on`, :func:`judge`;
* disputes: :func:`open_dispute`, :func:`lose_by_silence`, :func:`played_to_referee`,
  :func:`play_against_a_liar`;
* later rounds and merges: :func:`open_round`, :func:`open_and_commit`, :func:`tape`,
  :func:`post_tape`, :func:`merge_round_0`, :func:`merge_and_settle`, :func:`merge`;
* tape witnesses: :func:`witnessed_run`, :func:`merged` (round 0 merged) and
  :func:`attest`;
* an honest island's evidence at a real relay on loopback (the ``relay`` fixture,
  :func:`serve_evidence`) and a lie about it (:func:`round_0_with_a_lie`);
* an auditor over the service whose replay is stood in for: :class:`ReplayStandIn`.

A test module takes the fixtures it uses by importing them (``service``, ``bonded``,
``three``, and
``relay`` with the relay tests' ``clock``, ``keys`` and ``serve`` it stands on).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hypertrain.api.client import ChallengeClient
from hypertrain.auditor.replay import AuditOutcome
from hypertrain.auditor.runner import Auditor, RoundRecords
from hypertrain.challenge.app import _poll_beacon, create_app
from hypertrain.challenge.settings import Settings
from hypertrain.dispute.messages import DisputeAnswer, commitment_of
from hypertrain.evidence.index import CheckpointIndex
from hypertrain.protocol.honeypots import HoneypotEntry, HoneypotList, commitment
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import AuditAssignment
from hypertrain.relay.app import create_app as create_relay
from hypertrain.relay.client import RelayClient
from hypertrain.relay.clock import BeaconClock
from tests.challenge.disputeplay import LEAVES, TREE, answer, open_body, play_to_referee
from tests.challenge.disputeplay import commitment as answer_commitment
from tests.challenge.helpers import (
    AGGREGATOR,
    TOKENS,
    FakeLedger,
    SteppedBeacon,
    aggregator_split,
    bearer,
    commit_body,
    join_body,
    make_settings,
    manifest_doc,
    signed,
    write_metagraph,
)
from tests.relay.conftest import Running, clock, keys, serve
from tests.relay.helpers import NOW_ROUND, Keys
from tests.relay.helpers import make_settings as relay_settings

__all__ = ["clock", "keys", "serve"]  # the relay tests' fixtures the relay fixture uses

RUN = "run-d"
WINDOW = 2  # the manifest's round.dispute_window_rounds (tests/challenge/helpers.py)
REFEREE = Hotkey.from_seed(b"\x66" * 32)
AUDITOR = Hotkey.from_seed(b"\x55" * 32)
OTHER_AUDITOR = Hotkey.from_seed(b"\x56" * 32)
THIRD_AUDITOR = Hotkey.from_seed(b"\x57" * 32)
ISLANDS = [Hotkey.from_seed(bytes([i + 1]) * 32) for i in range(2)]
HONEYPOTS = HoneypotList(
    salt="5a" * 32,
    entries=[
        HoneypotEntry(hotkey=ISLANDS[0].ss58_address, role="island", strategy="honest"),
        HoneypotEntry(hotkey=ISLANDS[1].ss58_address, role="island", strategy="wrong-samples"),
        HoneypotEntry(hotkey=AUDITOR.ss58_address, role="auditor", strategy="lying"),
    ],
)
# the dispute section of dispute_run (the service fixture): the referee rules
REFEREED = {"bond": 0, "answer_rounds": 3, "referee_rounds": 3, "referees": [REFEREE.ss58_address]}
# the dispute rules of rules_run and jury_run, less their referees
RULES = {"bond": 0, "answer_rounds": 3, "referee_rounds": 3, "clock_rounds": 6}
CLOCK_ROUNDS = 60  # the manifest's default dispute.clock_rounds
REFEREE_ROUNDS, REFEREE_EXTENSIONS = 3, 2  # REFEREED's referee_rounds, the default extensions
BOUND = 2 * CLOCK_ROUNDS + REFEREE_ROUNDS * (1 + REFEREE_EXTENSIONS)  # a game's, in dispute_run


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


def addresses(*keys: Hotkey) -> frozenset[str]:
    return frozenset(k.ss58_address for k in keys)


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


# Round 0 and its verdicts


def open_round(svc: Played, *, run_id: str = RUN, start_url: str = "u") -> int:
    """The operator opens the run's next round; its index."""
    r = svc.client.post(
        f"/admin/v1/runs/{run_id}/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": "aa" * 32, "start_model_url": start_url},
    )
    assert r.status_code == 200, r.text
    return int(r.json()["body"]["round"])


def assignment(svc: Played, island: Hotkey, index: int = 0) -> dict[str, Any]:
    """``island``'s audit assignment in round ``index`` (its body)."""
    assigned = svc.client.get(
        f"/worker/v1/runs/{RUN}/rounds/{index}/assignments", headers=bearer("worker")
    ).json()
    body: dict[str, Any] = next(
        a["body"] for a in assigned if a["body"]["hotkey"] == island.ss58_address
    )
    return body


def commit_round_0(svc: Played, checkpoint_urls: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Round 0 with both islands joined and committed (the tree of ``disputeplay``) and its
    audits selected; island 0's assignment. ``checkpoint_urls``: each island's index URL,
    by address (the helpers' default otherwise)."""
    for key in ISLANDS:
        assert svc.post("/v1/join", key, "join", join_body()).status_code == 200
    open_round(svc, start_url="http://relay/m0")
    for key in ISLANDS:
        body = {**commit_body(0), "checkpoint_root": TREE.root_hex}
        if checkpoint_urls is not None:
            body["checkpoint_url"] = checkpoint_urls[key.ss58_address]
        assert svc.post("/v1/commit", key, "commit", body).status_code == 200, body
    svc.tick(4)
    return assignment(svc, ISLANDS[0])


def open_and_commit(svc: Played, index: int) -> None:
    """Round ``index`` opened, both islands committed and its audits selected."""
    open_round(svc)
    for key in ISLANDS:  # each island its own update and root: no copy forces an audit
        body = commit_body(index, island=key.ss58_address)
        assert svc.post("/v1/commit", key, "commit", body).status_code == 200
    svc.tick(4)


def send_verdict(svc: Played, auditor: Hotkey, body: dict[str, Any]) -> Any:
    """``auditor`` signs and posts the verdict ``body``; the service's answer."""
    return svc.client.post(
        "/worker/v1/verdict", headers=bearer("worker"), json=signed(auditor, "verdict", body, RUN)
    )


def verdict_body(
    svc: Played, island: Hotkey, result: str, *, index: int = 0, **fields: Any
) -> dict[str, Any]:
    """A verdict on ``island``'s assignment in round ``index``: ``result`` and ``fields``."""
    body = {**assignment(svc, island, index), "result": result, **fields}
    body.pop("selection_beacon_round")
    return body


def post_verdict(
    svc: Played, auditor: Hotkey, island: Hotkey, result: str, *, index: int = 0, **fields: Any
) -> Any:
    """``auditor``'s verdict ``result`` (with ``fields``) on ``island``; the answer."""
    return send_verdict(svc, auditor, verdict_body(svc, island, result, index=index, **fields))


def verdict_on(svc: Played, auditor: Hotkey, island: Hotkey, result: str) -> Any:
    """``auditor``'s verdict on ``island`` in round 0; a mismatch names the end of the first
    assigned segment as the first bad leaf."""
    body = verdict_body(svc, island, result)
    if result == "mismatch":
        body["first_bad_leaf"] = body["segments"][0] + 1
    return send_verdict(svc, auditor, body)


def judge(
    svc: Played, auditor: Hotkey, island: Hotkey, result: str, *, index: int = 0
) -> tuple[str, list[int]]:
    """``auditor``'s accepted verdict ``result`` on ``island`` as a replay gives it (for
    ``unverifiable`` the index withheld, otherwise the update checked); its id and the
    island's assigned segments."""
    withheld = result == "unverifiable"
    fields = {"detail": "index withheld"} if withheld else {"update_checked": True}
    body = verdict_body(svc, island, result, index=index, **fields)
    r = send_verdict(svc, auditor, body)
    assert r.status_code == 200, r.text
    return r.json()["verdict_id"], sorted(body["segments"])


def to_verdict(svc: Played) -> tuple[str, int]:
    """Round 0 with both islands committed and island 0 judged a mismatch by
    :data:`AUDITOR`; the verdict's id and the disputable segment."""
    segment = commit_round_0(svc)["segments"][0]
    r = verdict_on(svc, AUDITOR, ISLANDS[0], "mismatch")
    assert r.status_code == 200, r.text
    return r.json()["verdict_id"], segment


def verdict_of_check(
    svc: Played, check: str | None, bad_leaf: int | None = None
) -> tuple[str, list[int]]:
    """Round 0 committed; island 0 judged a mismatch of ``check`` by :data:`AUDITOR` (of
    ``unverifiable``: bytes withheld, no check and no leaf); the verdict's id and the
    island's assigned segments."""
    mine = commit_round_0(svc)
    segments = sorted(mine["segments"])
    leaf = {"start": 0, "update": 4}.get(check or "", segments[0] + 1)
    fields = {"first_bad_leaf": leaf if bad_leaf is None else bad_leaf}
    fields |= {"check": check, "update_checked": True}
    body = verdict_body(svc, ISLANDS[0], "mismatch", **fields)
    if check == "unverifiable":
        body = verdict_body(svc, ISLANDS[0], "unverifiable", detail="index withheld")
    r = send_verdict(svc, AUDITOR, body)
    assert r.status_code == 200, r.text
    return r.json()["verdict_id"], segments


def barred(svc: Service) -> list[str]:
    """The auditors the service holds faulty (their verdicts are refused)."""
    conn = svc.client.app.state.service.conn  # type: ignore[attr-defined]
    return [row[0] for row in conn.execute("SELECT auditor FROM faulty_auditors")]


# Disputes


def open_dispute(
    svc: Played, verdict_id: str, segment: int, island: Hotkey = ISLANDS[0]
) -> tuple[str, dict[str, Any]]:
    """``island`` disputes the verdict at ``segment``; the dispute's id and its game."""
    opened = svc.post("/v1/disputes", island, "dispute-open", open_body(verdict_id, segment))
    assert opened.status_code == 200, opened.text
    return opened.json()["dispute_id"], opened.json()["game"]


def lose_by_silence(svc: Played, verdict_id: str, segment: int, island: Hotkey = ISLANDS[0]) -> str:
    """``island`` disputes the verdict and commits its first answer; the auditor will not
    answer, so the game is overturned once its answer deadline (3 beacon rounds) passed.
    The dispute's id."""
    dispute_id, game = open_dispute(svc, verdict_id, segment, island)
    body = answer_commitment(game, "island")
    r = svc.post(f"/v1/disputes/{dispute_id}/answer", island, "dispute-answer", body)
    assert r.status_code == 200, r.text
    return dispute_id


def played_to_referee(svc: Played, dispute_id: str) -> dict[str, Any]:
    """Island 0 and :data:`AUDITOR` answer every query until the game waits for the referee."""
    return play_to_referee(svc.client, RUN, dispute_id, ISLANDS[0], AUDITOR)


def liar_answer(game: dict[str, Any]) -> dict[str, Any]:
    """A lying auditor's answer: its own hashes, then at the layer stage the honest
    island's (the true digest of every section of the step it lied about)."""
    if game["stage"] == "layer":
        truth = answer(game, "island", 1, game["island_end"])
        return {**truth, "salt": "d4" * 32}
    return answer(game, "auditor", 1, game["island_end"])


def play_against_a_liar(
    svc: Played, dispute_id: str, *, turns: int, wait: int = 0
) -> dict[str, Any] | None:
    """Island 0 answers every query truly and :data:`AUDITOR` with :func:`liar_answer`, each
    ``wait`` beacon rounds after the query, until the game leaves the narrowing stages (the
    game then) or ``turns`` queries were answered (``None``)."""
    for _ in range(turns):
        game: dict[str, Any] = svc.client.get(f"/v1/disputes/{dispute_id}").json()["game"]
        if game["stage"] not in ("step", "layer", "op") or game.get("outcome"):
            return game
        if wait:
            svc.tick(wait)
        revealing = len(game["commitments"]) == 2
        bodies = {
            "island": answer(game, "island", 1, game["island_end"]),
            "auditor": liar_answer(game),
        }
        for key, party in ((ISLANDS[0], "island"), (AUDITOR, "auditor")):
            if party in game["answers" if revealing else "commitments"]:
                continue
            body = bodies[party]
            if not revealing:
                body = commitment_of(DisputeAnswer.model_validate(body)).model_dump(mode="json")
            r = svc.post(f"/v1/disputes/{dispute_id}/answer", key, "dispute-answer", body)
            assert r.status_code == 200, r.text
    return None


# Merges


def tape(index: int = 0, **fields: Any) -> dict[str, Any]:
    """A merge tape of round ``index`` with made-up hashes; ``fields`` add or replace."""
    return {
        "round": index,
        "start_model_sha256": "aa" * 32,
        "new_model_sha256": "bb" * 32,
        "new_model_url": "u",
        "outer_state_sha256": "cc" * 32,
        "tape_sha256": "dd" * 32,
        **fields,
    }


def post_tape(
    svc: Played, body: dict[str, Any], key: Hotkey = AGGREGATOR, run_id: str = RUN
) -> Any:
    """``key`` signs and posts the merge tape ``body``; the service's answer."""
    return svc.client.post(
        "/worker/v1/merge", headers=bearer("worker"), json=signed(key, "merge-tape", body, run_id)
    )


def split_tape(svc: Played, index: int = 0, **fields: Any) -> dict[str, Any]:
    """The aggregator's tape of round ``index``: both islands included or excluded as its
    collection decides from the public round record."""
    split = aggregator_split(svc.client, RUN, index, [k.ss58_address for k in ISLANDS])
    return tape(index, **split, **fields)


def merge_round_0(svc: Played) -> None:
    """The aggregator merges round 0; the round waits to settle."""
    m = post_tape(svc, split_tape(svc))
    assert m.status_code == 200 and m.json()["phase"] == "settle", m.text


def merge_and_settle(svc: Played) -> None:
    """The aggregator merges round 0, then far past every window and dispute bound of it."""
    m = post_tape(svc, split_tape(svc))
    assert m.status_code == 200, m.text
    svc.tick(40)


def merge(svc: Played, index: int, pending: bool = False) -> None:
    """Merge round ``index``; ``pending``: islands without a verdict are ``audit_pending``."""
    detail = svc.client.get(f"/v1/runs/{RUN}/rounds/{index}").json()
    judged = {v["envelope"]["body"]["hotkey"] for v in detail["verdicts"]}
    left_out = {k.ss58_address for k in ISLANDS} - judged if pending else set()
    body = tape(
        index,
        included=sorted({k.ss58_address for k in ISLANDS} - left_out),
        excluded=dict.fromkeys(sorted(left_out), "audit_pending"),
    )
    m = post_tape(svc, body)
    assert m.status_code == 200, m.text


# Tape witnesses: keys that recompute the aggregator's tape and attest to it

WITNESS = Hotkey.from_seed(b"\x71" * 32)
SECOND = Hotkey.from_seed(b"\x72" * 32)  # a second listed witness
TAPE_SIGNER = Hotkey.from_seed(b"\x58" * 32)  # the witnessed runs' named aggregator
WITNESS_WAIT = 40  # beacon rounds the next round waits for the witnesses
DIFF = "tape.excluded[0].reason: tape says 'near_duplicate', recomputed 'none'"


@contextlib.contextmanager
def witnessed_run(
    tmp_path: Path, required: int, *, wait: int | None = WITNESS_WAIT, **settings: Any
) -> Iterator[Service]:
    """:func:`dispute_run` with ``required`` tape witnesses, :data:`TAPE_SIGNER` the named
    aggregator and the witnesses registered; ``wait``: the witnesses' wait in beacon rounds
    (``None``: the service's default)."""
    keys = [k.ss58_address for k in [*ISLANDS, WITNESS, SECOND, AUDITOR, TAPE_SIGNER]]
    metagraph = write_metagraph(tmp_path / "registered.json", keys)
    if wait is not None:
        settings["witness_wait_rounds"] = wait
    aggregators = addresses(TAPE_SIGNER)
    with dispute_run(
        tmp_path,
        tape_witnesses=required,
        metagraph_file=metagraph,
        aggregator_hotkeys=aggregators,
        **settings,
    ) as svc:
        yield svc


def merged(svc: Played) -> str:
    """Round 0: both islands audited ``match``, :data:`TAPE_SIGNER`'s tape in; its hash."""
    commit_round_0(svc)
    for island in ISLANDS:
        r = post_verdict(svc, AUDITOR, island, "match", update_checked=True)
        assert r.status_code == 200, r.text
    svc.tick(20)
    body = tape(
        0,
        new_model_url="http://relay/m1",
        included=sorted(k.ss58_address for k in ISLANDS),
        excluded={},
    )
    r = post_tape(svc, body, TAPE_SIGNER)
    assert r.status_code == 200, r.text
    return str(body["tape_sha256"])


def attest(svc: Played, key: Hotkey, tape: str, diff: str | None = None) -> Any:
    """``key`` attests to round 0's ``tape``: agrees, or names its first difference."""
    body = {"round": 0, "tape_sha256": tape, "agrees": diff is None, "first_difference": diff}
    return svc.post("/v1/tape-attestation", key, "tape-attestation", body)


# An honest island's evidence at a real relay, and a lie about it


LIAR, HONEST = AUDITOR, ISLANDS[0]
WITHHELD = {"result": "unverifiable", "detail": "checkpoint withheld"}  # a lie, when served


@pytest.fixture
def relay(
    tmp_path: Path, keys: Keys, clock: BeaconClock, serve: Callable[[FastAPI], Running]
) -> Running:
    """A real relay of this run on loopback (the honest island may upload to it)."""
    return serve(create_relay(relay_settings(tmp_path / "relay", keys, run_id=RUN), clock=clock))


def serve_evidence(relay_url: str, key: Hotkey, round_index: int = 0) -> str:
    """What an honest island serves: its checkpoint index and every checkpoint an audit may
    select (made-up bytes ending in their leaf); returns the index's URL."""
    blobs = [LEAVES[k] + LEAVES[k] for k in range(len(LEAVES))]
    index = CheckpointIndex(
        round_index,
        tuple(leaf.hex() for leaf in LEAVES),
        tuple(hashlib.sha256(b).hexdigest() for b in blobs),
    )
    expiry = NOW_ROUND + 10
    with RelayClient(relay_url, key, RUN) as client:
        for blob in blobs[1:]:  # segment 0 starts from the public start state
            client.put(blob, kind="checkpoint", round=round_index, expiry_round=expiry)
        return client.url(
            client.put(index.to_bytes(), kind="other", round=round_index, expiry_round=expiry)
        )


def round_0_with_a_lie(
    svc: Played, relay_url: str, lie: Mapping[str, Any], *, serve: bool = True
) -> str:
    """Round 0 committed (the :data:`HONEST` island's evidence at the relay unless ``serve``
    is false: then no relay runs) and :data:`LIAR`'s verdict ``lie`` on it posted (a
    ``match`` or ``mismatch`` says the update was checked); the verdict's id."""
    junk = f"{relay_url}/blobs/{'ee' * 32}"
    served = serve_evidence(relay_url, HONEST) if serve else junk
    commit_round_0(svc, {k.ss58_address: served if k == HONEST else junk for k in ISLANDS})
    fields = {key: value for key, value in lie.items() if key != "result"}
    if lie["result"] != "unverifiable":
        fields = {"update_checked": True, **fields}
    r = post_verdict(svc, LIAR, HONEST, lie["result"], **fields)
    assert r.status_code == 200, r.text
    verdict_id: str = r.json()["verdict_id"]
    return verdict_id


# An auditor over the service. The segment replay itself is stood in for (it is tested with
# real islands in tests/auditor): only the choice of work and the posting are real.


@dataclass(frozen=True, slots=True)
class ReplayStandIn(Auditor):
    """An auditor whose replay always matches; it records what it was asked to judge."""

    judged: list[tuple[int, str]] | None = None

    def judge(self, detail: RoundRecords, assignment: AuditAssignment) -> AuditOutcome:
        assert self.judged is not None
        self.judged.append((assignment.round, assignment.hotkey))
        return AuditOutcome("match", None, True, "re-judged", tuple(assignment.segments))


def stand_in_auditor(
    svc: Service, key: Hotkey, tmp: Path, judged: list[tuple[int, str]]
) -> ReplayStandIn:
    """:class:`ReplayStandIn` for ``key``, reaching the service with the worker token."""
    client = ChallengeClient("http://testserver", worker_token=TOKENS["worker"], http=svc.client)  # type: ignore[arg-type]
    return ReplayStandIn(
        service=client,
        relay=RelayClient("http://127.0.0.1:9", None, RUN),
        key=key,
        manifest=client.manifest(RUN),
        dataset_dir=tmp,
        judged=judged,
    )
