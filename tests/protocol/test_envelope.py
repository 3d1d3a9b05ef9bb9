from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypertrain.protocol.envelope import Envelope, decode_envelope, open_envelope, seal
from hypertrain.protocol.errors import EnvelopeError, ReplayError
from hypertrain.protocol.identity import Hotkey, load_key_file, write_key_file
from hypertrain.protocol.replay import ReplayStore

KEY = Hotkey.from_seed(b"\x11" * 32)
OTHER = Hotkey.from_seed(b"\x22" * 32)


def sample_envelope(**overrides: object) -> Envelope:
    args: dict[str, object] = {
        "domain": "commit",
        "run_id": "run-1",
        "body": {"round": 3, "root": "ab" * 32, "note": "é"},
        "expiry_round": 100,
        "nonce": "nonce-0001",
    }
    args.update(overrides)
    return seal(KEY, **args)  # type: ignore[arg-type]


def test_seal_and_open() -> None:
    env = sample_envelope()
    verified = open_envelope(env.to_bytes(), domain="commit", run_id="run-1", current_round=50)
    assert verified.signer == KEY.ss58_address
    assert verified.body["round"] == 3
    assert verified.public_key == KEY.public_key


def test_signing_bytes_layout() -> None:
    env = sample_envelope()
    raw = env.signing_bytes()
    assert raw.startswith(b"hypertrain/v1/envelope\x00{")
    assert b'"signature"' not in raw


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        ({"domain": "verdict"}, "wrong_domain"),
        ({"run_id": "run-2"}, "wrong_run"),
        ({"current_round": 101}, "expired"),
        ({"is_registered": lambda s: False}, "unknown_signer"),
    ],
)
def test_open_refuses_with_reason(kwargs: dict[str, object], reason: str) -> None:
    base: dict[str, object] = {"domain": "commit", "run_id": "run-1", "current_round": 100}
    base.update(kwargs)
    with pytest.raises(EnvelopeError) as info:
        open_envelope(sample_envelope().to_bytes(), **base)  # type: ignore[arg-type]
    assert info.value.reason == reason


def test_any_field_change_fails() -> None:
    doc = json.loads(sample_envelope().to_bytes())
    changes = {
        "domain": "commits",
        "run_id": "run-2",
        "nonce": "nonce-0002",
        "expiry_round": 101,
        "body": {"round": 4, "root": "ab" * 32, "note": "é"},
        "signer": OTHER.ss58_address,
    }
    for field, value in changes.items():
        bad = {**doc, field: value}
        with pytest.raises(EnvelopeError) as info:
            open_envelope(bad, domain=bad["domain"])
        assert info.value.reason == "bad_signature", field


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_single_byte_change_fails(data: st.DataObject) -> None:
    raw = bytearray(sample_envelope().to_bytes())
    pos = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    new = data.draw(st.integers(min_value=0, max_value=255).filter(lambda b: b != raw[pos]))
    raw[pos] = new
    with pytest.raises(EnvelopeError):
        env = decode_envelope(bytes(raw))
        open_envelope(env, domain=env.domain)


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"not json", "malformed"),
        (b"[]", "malformed"),
        (b"{}", "malformed"),
        (b'{"version": 2}', "wrong_version"),
        (b"x" * (2 << 20), "malformed"),
    ],
)
def test_decode_refuses(raw: bytes, reason: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        decode_envelope(raw)
    assert info.value.reason == reason


def test_extra_field_and_bad_types_refused() -> None:
    doc = json.loads(sample_envelope().to_bytes())
    for bad in (
        {**doc, "extra": 1},
        {**doc, "expiry_round": "100"},
        {**doc, "signature": doc["signature"][:-2]},
        {**doc, "signer": "5" * 48},
        {**doc, "body": []},
    ):
        with pytest.raises(EnvelopeError):
            open_envelope(bad, domain="commit")


def test_wallet_signed_envelope_and_replay(tmp_path: Path) -> None:
    key_path = tmp_path / "wallets" / "w" / "hotkeys" / "h"
    write_key_file(b"\x33" * 32, key_path)
    key = load_key_file(key_path)
    env = seal(key, domain="join", run_id="r", body={"x": 1}, expiry_round=9)
    store = ReplayStore(tmp_path / "replay.sqlite")
    verified = open_envelope(env.to_bytes(), domain="join")
    store.record(verified.signer, env.nonce, env.expiry_round)
    with pytest.raises(ReplayError):
        store.record(verified.signer, env.nonce, env.expiry_round)
    store.close()
    # Survives a restart.
    reopened = ReplayStore(tmp_path / "replay.sqlite")
    assert reopened.seen(verified.signer, env.nonce)
    with pytest.raises(ReplayError) as info:
        reopened.record(verified.signer, env.nonce, env.expiry_round)
    assert info.value.reason == "replayed"
    assert reopened.prune(10) == 1
    assert not reopened.seen(verified.signer, env.nonce)
