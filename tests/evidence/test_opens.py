"""A long-lived role's round-open records and assignment chain (``evidence.opens``): each
round's record read and verified once, the samples the same as a walk from round 0 across
epochs, and a record that fails verification kept out without losing the others."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hypertrain.data import Dataset
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.inputs import iter_round_assignments, round_sample_ids
from hypertrain.evidence.opens import OpenRecords
from hypertrain.protocol.envelope import Envelope, seal
from hypertrain.protocol.manifest import RunManifest
from tests.auditor.world import COORD, ISLANDS, RUN_ID, make_dataset, manifest_doc

ROSTER = [k.ss58_address for k in ISLANDS]


@pytest.fixture(scope="module")
def world(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Dataset, Any]:
    dataset = make_dataset(assets_dir, tmp_path_factory.mktemp("opens") / "dataset")
    # 64 samples an island a round: 40 rounds of one to three islands pass the
    # training split about three times
    layout = {"micro_batch_size": 2, "micro_batches": 8}
    return dataset, RunManifest.model_validate(manifest_doc(dataset, layout=layout))


def _record(index: int, roster: list[str] = ROSTER, key: Any = COORD) -> Envelope:
    body = {"round": index, "start_model_sha256": "ab" * 32, "start_model_url": "memory:x",
            "beacon_round": 1 + index, "assignment_key": f"{index + 1:02x}" * 32,
            "roster": roster, "commit_deadline_round": 5 + index}  # fmt: skip
    return seal(key, domain="round-open", run_id=RUN_ID, body=body, expiry_round=10_000)


def test_each_record_is_read_once_and_the_samples_match_a_walk_from_round_0(
    world: tuple[Dataset, RunManifest],
) -> None:
    dataset, manifest = world
    # rosters that change between rounds, over enough rounds to start new epochs
    rosters = [ROSTER[: 1 + w % 3] for w in range(40)]
    envelopes = [_record(w, rosters[w]) for w in range(40)]
    reads: list[int] = []

    def read(w: int) -> Envelope:
        reads.append(w)
        return envelopes[w]

    opens = OpenRecords(manifest)
    for index in range(40):
        records = opens.upto(index, read)
        hotkey = rosters[index][-1]
        assert opens.sample_ids(dataset, index, hotkey) == round_sample_ids(
            manifest, dataset, records, hotkey
        )
    assert reads == list(range(40))  # every record read once, in order
    walk = list(iter_round_assignments(manifest, dataset, opens.upto(39, read)))
    assert sum(a.epoch_started for a in walk[1:]) >= 2  # the walk crossed epochs
    # a walk to a round assigned before, and a jump past rounds not yet assigned
    assert opens.sample_ids(dataset, 7, rosters[7][0]) == round_sample_ids(
        manifest, dataset, opens.upto(7, read), rosters[7][0]
    )
    jump = OpenRecords(manifest)
    jump.upto(39, read)
    assert jump.sample_ids(dataset, 39, ROSTER[0]) == opens.sample_ids(dataset, 39, ROSTER[0])


def test_a_record_that_fails_verification_is_not_kept(world: tuple[Dataset, RunManifest]) -> None:
    dataset, manifest = world
    forged = {0: _record(0), 1: _record(1, key=ISLANDS[0]), 2: _record(2)}  # round 1: not signed
    opens = OpenRecords(manifest)
    with pytest.raises(VerificationError):
        opens.upto(2, forged.__getitem__)
    assert len(opens) == 1  # round 0 kept, nothing after the refused record
    forged[1] = _record(1)  # the coordinator's own record, read on the next try
    assert [r.round for r in opens.upto(2, forged.__getitem__)] == [0, 1, 2]
    with pytest.raises(VerificationError, match="has not been read"):
        opens.sample_ids(dataset, 3, ROSTER[0])
    with pytest.raises(VerificationError, match="assignment of round 0"):
        opens.sample_ids(dataset, 0, "5GnotInTheRoster")


def test_a_predicted_next_round_gives_the_ids_the_opened_round_gives(
    world: tuple[Dataset, RunManifest],
) -> None:
    """Overlapped rounds: the ids an island predicts for the round after the last one
    read are the ids of the round when it opens with that key and roster; the
    prediction is never kept (a different opened record is assigned afresh)."""
    dataset, manifest = world
    envelopes = [_record(w) for w in range(12)]
    opens = OpenRecords(manifest)
    for index in range(11):
        records = opens.upto(index, envelopes.__getitem__)
        predicted = records[-1].model_copy(
            update={"round": index + 1, "assignment_key": f"{index + 2:02x}" * 32}
        )
        guess = opens.next_ids(dataset, predicted, ROSTER[1])
        other = opens.next_ids(dataset, predicted.model_copy(update={"roster": ROSTER[1:]}),
                               ROSTER[1])  # fmt: skip
        assert len(opens) == index + 1  # nothing kept
        opens.upto(index + 1, envelopes.__getitem__)
        assert opens.sample_ids(dataset, index + 1, ROSTER[1]) == guess
        assert other != guess  # without the first island the round is split otherwise
        opens = OpenRecords(manifest) if index % 2 else opens  # a fresh role predicts too
        opens.upto(index, envelopes.__getitem__)
    with pytest.raises(VerificationError, match="does not follow"):
        opens.next_ids(dataset, predicted.model_copy(update={"round": 3}), ROSTER[1])
