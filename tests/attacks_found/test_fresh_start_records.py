"""``fresh_start`` in the signed round-open record: old records, and the published schema.

Records written before the field existed carry no ``fresh_start``; they must still
verify under their signature and read as an empty list (no island starts fresh), so a
replay of an old run derives every start as it was derived then. A record naming nobody
is written without the field (the bytes records had before it), and the JSON Schema the
project publishes for ``round-open`` (docs/schemas, ``additionalProperties: false``) must
admit a record naming someone, or every verifier that checks records against the
published schema refuses it (found: the schema was not regenerated with the field).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.start import carries_previous
from hypertrain.evidence.verify import verify_round_open
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen
from tests.challenge.helpers import manifest_doc

SCHEMA = Path(__file__).parents[2] / "docs" / "schemas" / "round-open.schema.json"
COORD = Hotkey.from_seed(b"\x61" * 32)
A, B = sorted(Hotkey.from_seed(bytes([0x62 + i]) * 32).ss58_address for i in range(2))
RUN = "run-fresh-records"


def _manifest() -> RunManifest:
    doc = manifest_doc(RUN, rate=1.0, segments=1)
    doc["inner"] = {**doc.get("inner", {}), "state_policy": "carry"}
    doc["coordinator"] = COORD.ss58_address
    return RunManifest.model_validate(doc)


def _old_body(index: int) -> dict[str, Any]:
    """A round-open body as the service wrote it before ``layouts`` and ``fresh_start``."""
    return {
        "round": index,
        "start_model_sha256": "aa" * 32,
        "start_model_url": "http://relay/m",
        "beacon_round": 100 + index,
        "assignment_key": "bb" * 32,
        "roster": [A, B],
        "commit_deadline_round": 200 + index,
    }


def _sealed(body: dict[str, Any]) -> dict[str, Any]:
    env = seal(COORD, domain="round-open", run_id=RUN, body=body, expiry_round=10**9)
    return env.model_dump()


def test_an_old_record_without_the_field_verifies_and_starts_nobody_fresh() -> None:
    manifest = _manifest()
    record = verify_round_open(_sealed(_old_body(1)), manifest, 1)
    assert record.fresh_start == []
    assert carries_previous(manifest, record, A) and carries_previous(manifest, record, B)


def test_a_record_cannot_be_given_a_fresh_start_after_it_was_signed() -> None:
    """The list is under the coordinator's signature: a peer that adds itself (or an
    honest island) to a relayed record breaks the signature, it does not change a start."""
    manifest = _manifest()
    raw = _sealed(_old_body(1))
    raw["body"] = {**raw["body"], "fresh_start": [A]}
    with pytest.raises(VerificationError):
        verify_round_open(raw, manifest, 1)
    bad = _sealed({**_old_body(1), "fresh_start": [B, A]})
    with pytest.raises(VerificationError, match="sorted"):
        verify_round_open(bad, manifest, 1)


@pytest.mark.parametrize("fresh", [[], [A]])
def test_a_record_the_service_signs_now_meets_the_published_schema(fresh: list[str]) -> None:
    body = RoundOpen.model_validate({**_old_body(1), "fresh_start": fresh}).model_dump(mode="json")
    assert ("fresh_start" in body) == bool(fresh)  # naming nobody: the old bytes
    if not fresh:
        assert body == _old_body(1) | {"layouts": {}}
    jsonschema = pytest.importorskip("jsonschema")  # in the lock (a transitive dependency)
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validate(body, schema)
