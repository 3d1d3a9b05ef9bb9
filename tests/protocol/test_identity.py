from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hypertrain.protocol.errors import IdentityError
from hypertrain.protocol.identity import (
    Hotkey,
    load_key_file,
    load_wallet_hotkey,
    ss58_decode,
    ss58_encode,
    verify_signature,
    write_key_file,
)


@pytest.fixture(scope="module")
def vectors(assets_dir: Path) -> dict[str, Any]:
    return dict(json.loads((assets_dir / "sr25519_vectors.json").read_text()))


def test_ss58_vectors(vectors: dict[str, Any]) -> None:
    for ex in vectors["ss58"]["examples"]:
        pk = bytes.fromhex(ex["public_key_hex"])
        assert ss58_encode(pk, ex["format"]) == ex["address"]
        assert ss58_decode(ex["address"], ex["format"]) == pk


def test_keypairs_from_seed(vectors: dict[str, Any]) -> None:
    for kp in vectors["keypairs_from_seed"]:
        if "mini_secret_seed_hex" not in kp:
            continue
        key = Hotkey.from_seed(bytes.fromhex(kp["mini_secret_seed_hex"]))
        assert key.public_key.hex() == kp["public_key_hex"]
        assert key.ss58_address == kp["ss58_format_42"]


def test_signature_vectors_strict(vectors: dict[str, Any]) -> None:
    for sig in vectors["signatures"]:
        ok = verify_signature(
            bytes.fromhex(sig["public_key_hex"]),
            bytes.fromhex(sig["message_hex"]),
            bytes.fromhex(sig["signature_hex"]),
        )
        assert ok == sig["expect_valid"], sig.get("note")


def test_bytes_wrapping_is_not_accepted() -> None:
    key = Hotkey.from_seed(b"\x01" * 32)
    wrapped = key.sign(b"<Bytes>hello</Bytes>")
    assert not verify_signature(key.public_key, b"hello", wrapped)
    assert verify_signature(key.public_key, b"hello", key.sign(b"hello"))


@pytest.mark.parametrize(
    "address",
    [
        "",
        "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQZ",  # bad checksum
        "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKut0Y",  # '0' is not base58
        "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKu",  # truncated
        "HNZata7iMYWmk5RvZRTiAsSDhV8366zq2YGb3tLH5Upf74F",  # format 2, not 42
        "x" * 200,
    ],
)
def test_ss58_decode_refuses(address: str) -> None:
    with pytest.raises(IdentityError):
        ss58_decode(address)


def test_ss58_encode_refuses_bad_key() -> None:
    with pytest.raises(IdentityError):
        ss58_encode(b"\x00" * 31)
    with pytest.raises(IdentityError):
        ss58_encode(b"\x00" * 32, 64)


def test_malformed_signature_inputs_return_false() -> None:
    key = Hotkey.from_seed(b"\x02" * 32)
    assert not verify_signature(key.public_key, b"m", b"\x00" * 63)
    assert not verify_signature(b"\x00" * 31, b"m", b"\x00" * 64)
    assert not verify_signature(key.public_key, b"m", b"\xff" * 64)


def test_bittensor_wallet_file_loads(tmp_path: Path) -> None:
    from bittensor_wallet import Wallet

    wallet = Wallet(name="miner", hotkey="default", path=str(tmp_path))
    wallet.create_new_hotkey(use_password=False, overwrite=True, suppress=True)
    key = load_wallet_hotkey("miner", "default", root=str(tmp_path))
    assert key.ss58_address == wallet.hotkey.ss58_address
    assert verify_signature(key.public_key, b"msg", key.sign(b"msg"))


def test_write_then_load_key_file(tmp_path: Path) -> None:
    path = tmp_path / "hk"
    written = write_key_file(b"\x05" * 32, path)
    assert load_key_file(path).ss58_address == written.ss58_address
    assert path.stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    "content, needle",
    [
        (b"", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b'{"secretSeed": "0x12"}', "32 bytes"),
        (b'{"secretSeed": "0xzz"}', "not hex"),
        (b'{"publicKey": "0x00"}', "no secretSeed"),
        (b"[1, 2]", "no secretSeed"),
        (b'{"secretSeed": 5}', "no secretSeed"),
        (b"x" * 70_000, "not a wallet key file"),
    ],
)
def test_bad_key_files(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "hk"
    path.write_bytes(content)
    with pytest.raises(IdentityError, match=needle):
        load_key_file(path)


def test_key_file_with_mismatched_address(tmp_path: Path) -> None:
    path = tmp_path / "hk"
    write_key_file(b"\x05" * 32, path)
    doc = json.loads(path.read_text())
    doc["ss58Address"] = Hotkey.from_seed(b"\x06" * 32).ss58_address
    path.write_text(json.dumps(doc))
    with pytest.raises(IdentityError, match="does not match"):
        load_key_file(path)


def test_missing_key_file(tmp_path: Path) -> None:
    with pytest.raises(IdentityError, match="cannot read"):
        load_key_file(tmp_path / "absent")
