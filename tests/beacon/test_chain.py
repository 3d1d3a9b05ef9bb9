from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hypertrain.beacon.chain import (
    QUICKNET,
    QUICKNET_HASH,
    chain_hash_of,
    load_chain_info,
    parse_chain_info,
    pin_chain_info,
)
from hypertrain.beacon.errors import ChainInfoError, ChainMismatchError


def test_recorded_quicknet_info_parses_to_the_constant(vectors: dict[str, Any]) -> None:
    info = parse_chain_info(json.dumps(vectors["chain_info"]))
    assert info == QUICKNET
    assert info.chain_hash_hex == QUICKNET_HASH
    assert pin_chain_info(vectors["chain_info"], QUICKNET_HASH.upper()) == QUICKNET


def test_default_beacon_id_is_not_hashed() -> None:
    # drand mainnet (beacon id "default", a G1-key scheme we do not verify) has a
    # well-known chain hash; it pins the hash layout independently of quicknet.
    digest = chain_hash_of(
        30,
        1595431050,
        bytes.fromhex(
            "868f005eb8e6e4ca0a47c8a77ceaa5309a47978a7c71bc5cce96366b5d7a5699"
            "37c529eeda66c7293784a9402801af31"
        ),
        bytes.fromhex("176f93498eac9ca337150b46d21dd58673ea4e3581185f869672e59fa4cb390a"),
        "default",
    )
    assert digest.hex() == "8990e7a9aaed2ffed73dbd7092123d6f289930540d7651336225dc172e51b2ce"
    doc = QUICKNET.to_json()
    doc["metadata"] = {"beaconID": "default"}
    with pytest.raises(ChainInfoError, match="does not match"):
        parse_chain_info(doc)


def test_round_trip_through_json(tmp_path: Path) -> None:
    path = tmp_path / "info.json"
    path.write_text(json.dumps(QUICKNET.to_json()))
    assert load_chain_info(path) == QUICKNET


@pytest.mark.parametrize(
    "change",
    [
        {"period": 4},
        {"genesis_time": 1692803368},
        {"groupHash": "00" * 32},
        {"metadata": {"beaconID": "mainnet"}},
        {"hash": "00" * 32},
    ],
)
def test_any_altered_field_breaks_the_hash(change: dict[str, Any]) -> None:
    with pytest.raises(ChainInfoError, match="does not match"):
        parse_chain_info({**QUICKNET.to_json(), **change})


@pytest.mark.parametrize(
    "change, message",
    [
        ({"schemeID": "pedersen-bls-chained"}, "not supported"),
        ({"public_key": "00" * 96}, "bad public key"),
        ({"public_key": "c0" + "00" * 95}, "bad public key"),
        ({"public_key": QUICKNET.public_key.hex()[:-2]}, "bad public key"),
        ({"public_key": QUICKNET.public_key.hex().upper()}, "lower-case hex"),
        ({"period": 0}, "period"),
        ({"period": "3"}, "integer"),
        ({"period": True}, "integer"),
        ({"groupHash": "ab"}, "group hash"),
        ({"hash": "ab"}, "expected 32"),
        ({"metadata": {"beaconID": "bad id with spaces"}}, "beacon id"),
        ({"metadata": {"beaconID": 3}}, "beaconID"),
    ],
)
def test_malformed_chain_info(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ChainInfoError, match=message):
        parse_chain_info({**QUICKNET.to_json(), **change})


def test_truncated_and_non_object_info() -> None:
    text = json.dumps(QUICKNET.to_json())
    with pytest.raises(ChainInfoError, match="not valid JSON"):
        parse_chain_info(text[:-5])
    with pytest.raises(ChainInfoError, match="JSON object"):
        parse_chain_info("[1, 2]")


def test_pin_refuses_another_chain() -> None:
    with pytest.raises(ChainMismatchError):
        pin_chain_info(QUICKNET.to_json(), "00" * 32)
