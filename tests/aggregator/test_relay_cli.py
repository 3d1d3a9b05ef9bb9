"""Against a real relay on loopback: uploads, cached downloads, verify-tape and rollback CLIs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hypertrain.aggregator.blobs import RelayBlobs, republish_missing
from hypertrain.aggregator.errors import BlobError
from hypertrain.aggregator.merge import merge
from hypertrain.aggregator.tape import Tape, decode_tape
from hypertrain.cli import main
from hypertrain.relay.client import RelayClient
from hypertrain.relay.errors import RelayError
from tests.aggregator.helpers import HOTKEYS, World
from tests.relay.conftest import Running
from tests.relay.helpers import RUN_ID, Keys

EXPIRY = 1005


def _published(relay: Running, keys: Keys, tmp: Path) -> tuple[World, Tape, RelayBlobs]:
    client = RelayClient(relay.url, keys.coordinator, RUN_ID)
    blobs = RelayBlobs(client, tmp / "cache", lambda: EXPIRY)
    w = World()
    for i in range(3):
        w.add(i)
    result = merge(w.inputs(), w.blobs)
    for sha, data in w.blobs.data.items():
        assert blobs.put(data, kind="other", round=0) == sha
    blobs.put(result.model_blob, kind="model", round=0)
    blobs.put(result.outer_blob, kind="outer_state", round=0)
    blobs.put(result.tape.to_bytes(), kind="tape", round=0)
    return w, result.tape, blobs


def test_relay_blobs_round_trip_cache_and_errors(
    relay: Running, keys: Keys, tmp_path: Path
) -> None:
    tape = _published(relay, keys, tmp_path)[1]
    fresh = RelayBlobs(RelayClient(relay.url, None, RUN_ID), tmp_path / "fresh")
    assert decode_tape(fresh.get(tape.sha256())) == tape
    cached = tmp_path / "fresh" / tape.sha256()
    cached.write_bytes(b"corrupted")  # a bad cache file is dropped and fetched again
    assert decode_tape(fresh.get(tape.sha256())) == tape
    with pytest.raises(BlobError) as missing:
        fresh.get("ab" * 32)
    assert missing.value.reason == "missing_blob"
    with pytest.raises(BlobError, match="needs a hotkey"):
        fresh.put(b"x", kind="other", round=0)
    assert fresh.relay.exists(tape.sha256()) == len(tape.to_bytes())
    # an unreachable relay is not a fault of the blob: it propagates, the step is retried
    gone = RelayBlobs(RelayClient("http://127.0.0.1:9", None, RUN_ID, attempts=1), tmp_path / "g")
    with pytest.raises(RelayError) as down:
        gone.get(tape.sha256())
    assert down.value.reason == "unreachable" and not isinstance(down.value, BlobError)


def test_verify_tape_cli_identical_and_tampered(
    relay: Running, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, tape, _ = _published(relay, keys, tmp_path)
    args = ["--relay-url", relay.url, "--cache-dir", str(tmp_path / "v")]
    assert main(["aggregator", "verify-tape", tape.sha256(), *args]) == 0
    assert "identical" in capsys.readouterr().out
    doc = tape.model_dump(mode="json")
    doc["included"][0]["clip_factor"] = 0.5
    forged = tmp_path / "forged.json"
    forged.write_bytes(Tape.model_validate(doc).to_bytes())
    assert main(["aggregator", "verify-tape", str(forged), *args]) == 1
    assert "DIFFERENT: tape.included[0].clip_factor" in capsys.readouterr().out
    assert main(["aggregator", "verify-tape", "nonsense", *args]) == 1
    assert "neither a file" in capsys.readouterr().err


def test_rollback_cli_writes_and_publishes(
    relay: Running, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, tape, _ = _published(relay, keys, tmp_path)
    key_file = tmp_path / "key.json"
    key_file.write_text(f'{{"secretSeed": "0x{"04" * 32}"}}')
    out = tmp_path / "rolled.json"
    argv = ["aggregator", "rollback", tape.sha256(), "--hotkey", HOTKEYS[1], "--relay-url",
            relay.url, "--out", str(out), "--key-file", str(key_file),
            "--expiry-round", str(EXPIRY)]  # fmt: skip
    assert main(argv) == 0
    rolled = decode_tape(out.read_bytes())
    assert rolled.rollback_of == tape.sha256()
    assert [i.hotkey for i in rolled.included] == [HOTKEYS[0], HOTKEYS[2]]
    assert RelayClient(relay.url, None, RUN_ID).exists(rolled.new_model_sha256)
    assert "rolled back" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["genesis", "merge", "run", "verify-tape", "rollback"])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["aggregator", command, "--help"])
    assert done.value.code == 0
    assert "--relay-url" in capsys.readouterr().out


def test_a_model_the_relay_lost_is_put_back_from_the_cache(
    relay: Running, keys: Keys, tmp_path: Path
) -> None:
    """A relay whose disk was lost while a round still trains on a model: the aggregator
    puts the model back from its cache once (else no island could train again)."""
    blobs = RelayBlobs(
        RelayClient(relay.url, keys.coordinator, RUN_ID), tmp_path / "c", lambda: EXPIRY
    )
    model = b"a model the relay lost" * 100
    sha = hashlib.sha256(model).hexdigest()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / sha).write_bytes(model)  # published earlier, then lost by the relay
    assert not blobs.relay.exists(sha)
    assert republish_missing(blobs, sha, "model", 3) is True
    assert blobs.relay.exists(sha) == len(model)
    assert republish_missing(blobs, sha, "model", 3) is False  # held: nothing to do
    with pytest.raises(BlobError) as gone:  # in neither place: loud, never a silent skip
        republish_missing(blobs, "cd" * 32, "model", 3)
    assert gone.value.reason == "missing_blob"
