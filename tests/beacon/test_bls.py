from __future__ import annotations

from typing import Any

import pytest

from hypertrain.beacon.bls import (
    DST,
    decode_public_key,
    decode_signature,
    generate_secret_key,
    public_key_of,
    round_message,
    sign_round,
)
from hypertrain.beacon.chain import QUICKNET
from hypertrain.beacon.errors import (
    ForgedSignatureError,
    IdentityPointError,
    MalformedError,
    NonCanonicalError,
    SubgroupError,
)
from hypertrain.beacon.verify import beacon_from_json, verify_beacon

# x = 4 lies on E(Fp) (4^3 + 4 is a square mod p) but not in the prime-order subgroup.
OFF_SUBGROUP_G1 = bytes([0x80]) + bytes(46) + bytes([4])


def test_real_quicknet_vectors_verify(vectors: dict[str, Any]) -> None:
    assert vectors["dst"].encode() == DST
    for b in vectors["beacons"]:
        randomness = verify_beacon(QUICKNET, b["round"], bytes.fromhex(b["signature"]))
        assert randomness.hex() == b["randomness"]


def test_round_message_layout() -> None:
    assert round_message(1).hex() == (
        "cd2662154e6d76b2b2b92e70c0cac3ccf534f9b74eb5b89819ec509083d00a50"
    )
    with pytest.raises(MalformedError):
        round_message(2**64)


def test_every_bit_flip_fails(vectors: dict[str, Any]) -> None:
    b = vectors["beacons"][0]
    signature = bytes.fromhex(b["signature"])
    for bit in range(len(signature) * 8):
        tampered = bytearray(signature)
        tampered[bit // 8] ^= 0x80 >> (bit % 8)
        with pytest.raises(
            (ForgedSignatureError, MalformedError, NonCanonicalError, SubgroupError)
        ):
            verify_beacon(QUICKNET, b["round"], bytes(tampered))


def test_changed_round_fails(vectors: dict[str, Any]) -> None:
    for b in vectors["beacons"]:
        for other in (b["round"] - 1, b["round"] + 1, b["round"] + 2**32):
            if other < 1:
                continue
            with pytest.raises(ForgedSignatureError):
                verify_beacon(QUICKNET, other, bytes.fromhex(b["signature"]))


@pytest.mark.parametrize(
    "raw, error",
    [
        (bytes(47), MalformedError),
        (bytes(49), MalformedError),
        (b"", MalformedError),
        (bytes([0xC0]) + bytes(47), IdentityPointError),
        (bytes([0xC0]) + bytes(46) + b"\x01", NonCanonicalError),
        (bytes([0xE0]) + bytes(47), NonCanonicalError),
        (bytes(48), MalformedError),  # compression flag missing
        (bytes([0x9F]) + b"\xff" * 47, MalformedError),  # x >= p
        (OFF_SUBGROUP_G1, SubgroupError),
    ],
)
def test_bad_signature_encodings(raw: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_signature(raw)
    with pytest.raises(error):
        verify_beacon(QUICKNET, 1, raw)


def test_error_reasons_are_distinct() -> None:
    with pytest.raises(SubgroupError) as info:
        verify_beacon(QUICKNET, 1, OFF_SUBGROUP_G1)
    assert info.value.reason == "not_in_subgroup"
    assert str(info.value).startswith("not_in_subgroup: ")


@pytest.mark.parametrize(
    "raw, error",
    [
        (bytes(95), MalformedError),
        (bytes([0xC0]) + bytes(95), IdentityPointError),
        (bytes([0xC0]) + bytes(94) + b"\x01", NonCanonicalError),
    ],
)
def test_bad_public_keys(raw: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_public_key(raw)


def test_bad_round_numbers(vectors: dict[str, Any]) -> None:
    signature = bytes.fromhex(vectors["beacons"][0]["signature"])
    for bad in (0, -1, True):
        with pytest.raises(MalformedError):
            verify_beacon(QUICKNET, bad, signature)


def test_local_key_signs_in_the_same_scheme() -> None:
    secret = generate_secret_key()
    public = decode_public_key(public_key_of(secret))
    signature = sign_round(secret, 7)
    assert len(signature) == 48
    assert decode_signature(signature) is not None
    from py_arkworks_bls12381 import GT, G1Point, G2Point

    hashed = G1Point.hash_to_curve(round_message(7), DST)
    assert GT.pairing_check([decode_signature(signature), hashed], [-G2Point(), public])
    for bad in (b"", bytes(32), b"\xff" * 32):
        with pytest.raises(MalformedError):
            sign_round(bad, 1)


def test_beacon_json_refuses_wrong_randomness_and_hex(vectors: dict[str, Any]) -> None:
    b = vectors["beacons"][1]
    good = {"round": b["round"], "signature": b["signature"], "randomness": b["randomness"]}
    assert beacon_from_json(QUICKNET, good).randomness.hex() == b["randomness"]
    with pytest.raises(ForgedSignatureError):
        beacon_from_json(QUICKNET, {**good, "randomness": "00" * 32})
    for bad in (
        {**good, "signature": b["signature"][:-1]},
        {**good, "signature": " " + b["signature"][1:]},
        {**good, "round": "2"},
        {**good, "round": 0},
    ):
        with pytest.raises(MalformedError):
            beacon_from_json(QUICKNET, bad)
    with pytest.raises(MalformedError):
        beacon_from_json(QUICKNET, b'{"round": 2, "signature": "b5')
