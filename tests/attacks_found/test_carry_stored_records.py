"""``carry_stored`` in the signed round-open record: who it may name, and old records.

An island the record lists uploads no carried state for its audits (miner.checkpoints),
so the list must be the coordinator's word alone (a peer that adds itself to a relayed
record breaks the signature), name only rostered islands, each once and sorted, and never
an island the record also starts fresh (that one carries nothing at all). A record naming
nobody keeps the bytes records had before the field existed, and the published schema
admits one that names someone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.verify import verify_round_open
from hypertrain.miner.checkpoints import CARRIED_FILE, carried_checkpoint
from hypertrain.protocol.messages import RoundOpen
from tests.attacks_found.test_fresh_start_records import A, B, _manifest, _old_body, _sealed

SCHEMA = Path(__file__).parents[2] / "docs" / "schemas" / "round-open.schema.json"


def test_an_old_record_lists_nobody_and_a_listed_island_keeps_its_duty(tmp_path: Path) -> None:
    """The list says what the relay should hold; the island still owes its carried state
    (``upload_selected`` skips it only when the relay holds it), so a wrong list costs
    bytes, never an audit."""
    manifest = _manifest()
    record = verify_round_open(_sealed(_old_body(1)), manifest, 1)
    assert record.carry_stored == []
    (tmp_path / CARRIED_FILE).write_bytes(b"x")
    assert (
        carried_checkpoint(manifest, record, A, tmp_path, committed=True) == tmp_path / CARRIED_FILE
    )
    listed = verify_round_open(_sealed({**_old_body(1), "carry_stored": [A]}), manifest, 1)
    assert listed.carry_stored == [A]
    assert (
        carried_checkpoint(manifest, listed, A, tmp_path, committed=True) == tmp_path / CARRIED_FILE
    )


@pytest.mark.parametrize(
    ("stored", "fresh", "error"),
    [
        ([B, A], [], "sorted"),
        ([A, A], [], "sorted"),
        (["5" + "x" * 47], [], "outside the roster"),
        ([A], [A], "starts fresh"),
    ],
)
def test_a_list_that_is_not_the_coordinators_rule_is_refused(
    stored: list[str], fresh: list[str], error: str
) -> None:
    manifest = _manifest()
    body = {**_old_body(1), "carry_stored": stored} | ({"fresh_start": fresh} if fresh else {})
    with pytest.raises(VerificationError, match=error):
        verify_round_open(_sealed(body), manifest, 1)


def test_a_peer_cannot_add_itself_to_a_signed_record() -> None:
    raw = _sealed(_old_body(1))
    raw["body"] = {**raw["body"], "carry_stored": [A]}
    with pytest.raises(VerificationError):
        verify_round_open(raw, _manifest(), 1)


@pytest.mark.parametrize("stored", [[], [A]])
def test_a_record_with_the_field_meets_the_published_schema(stored: list[str]) -> None:
    body = RoundOpen.model_validate({**_old_body(1), "carry_stored": stored}).model_dump(
        mode="json"
    )
    assert ("carry_stored" in body) == bool(stored)  # naming nobody: the old bytes
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(body, json.loads(SCHEMA.read_text(encoding="utf-8")))
