"""Tape witnesses: keys that recompute the aggregator's tape and attest to it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypertrain.protocol.identity import Hotkey
from tests.challenge.dispute_scenario.cast import AUDITOR, ISLANDS, addresses
from tests.challenge.dispute_scenario.merges import post_tape, tape
from tests.challenge.dispute_scenario.rounds import commit_round_0, post_verdict
from tests.challenge.dispute_scenario.runs import Played, Service, dispute_run
from tests.challenge.helpers import write_metagraph

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
