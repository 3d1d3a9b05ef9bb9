"""The beacon: drand randomness, verified, and the round clock the protocol trusts.

Public randomness decides who is audited; it must not exist when miners commit, so
every deadline is a drand round and every beacon is BLS-verified against a pinned
chain before use. Production uses drand quicknet (``bls-unchained-g1-rfc9380``); the
devnet runs :class:`LocalBeacon`, which signs in the same scheme with a local key.

API used by the challenge service, miners, auditors and the devnet:

- :class:`ChainInfo` (public key, ``period_s``, ``genesis_time``, group hash, beacon
  id, scheme; ``chain_hash`` / ``chain_hash_hex`` derived) and :data:`QUICKNET`;
  :func:`parse_chain_info` (drand ``/info`` JSON, hash recomputed),
  :func:`pin_chain_info` (also requires an expected hash), :func:`load_chain_info`.
- :class:`Beacon` (``round``, ``signature``, ``randomness``), always verified.
- :func:`verify_beacon` ``(chain, round, signature) -> randomness``; refusals are
  :class:`BeaconError` subclasses with a ``reason``: ``malformed``, ``non_canonical``,
  ``identity_point``, ``not_in_subgroup``, ``forged``. :func:`beacon_from_json`
  parses a drand answer.
- Round arithmetic (pure): :func:`round_at`, :func:`time_of_round`,
  :func:`first_round_after` (strictly later), :func:`first_round_after_time`.
- :class:`BeaconClient` ``(endpoints, chain, cache_path, timeout_s=, retries=)``:
  ``info()``, ``latest()``, ``get(round)``, ``wait_for(round)``; synchronous,
  thread-safe, SQLite cache of verified rounds.
- :class:`LocalBeacon`, :class:`LocalBeaconServer` (in-process, thread) and
  :func:`start_local_beacon` (subprocess on a free loopback port, returns
  :class:`LocalBeaconProcess` with ``url`` and ``chain``).
"""

from __future__ import annotations

from hypertrain.beacon.chain import (
    QUICKNET,
    QUICKNET_HASH,
    ChainInfo,
    load_chain_info,
    parse_chain_info,
    pin_chain_info,
)
from hypertrain.beacon.client import BeaconClient
from hypertrain.beacon.errors import (
    BeaconError,
    BeaconTimeoutError,
    BeaconUnavailableError,
    ChainInfoError,
    ChainMismatchError,
    EndpointError,
    ForgedSignatureError,
    FutureRoundError,
    IdentityPointError,
    MalformedError,
    NonCanonicalError,
    RoundNotAvailableError,
    SubgroupError,
    WrongRoundError,
)
from hypertrain.beacon.launch import LocalBeaconProcess, start_local_beacon
from hypertrain.beacon.local import LocalBeacon
from hypertrain.beacon.server import LocalBeaconServer
from hypertrain.beacon.timing import (
    first_round_after,
    first_round_after_time,
    round_at,
    time_of_round,
)
from hypertrain.beacon.verify import Beacon, beacon_from_json, verify_beacon

__all__ = [
    "QUICKNET",
    "QUICKNET_HASH",
    "Beacon",
    "BeaconClient",
    "BeaconError",
    "BeaconTimeoutError",
    "BeaconUnavailableError",
    "ChainInfo",
    "ChainInfoError",
    "ChainMismatchError",
    "EndpointError",
    "ForgedSignatureError",
    "FutureRoundError",
    "IdentityPointError",
    "LocalBeacon",
    "LocalBeaconProcess",
    "LocalBeaconServer",
    "MalformedError",
    "NonCanonicalError",
    "RoundNotAvailableError",
    "SubgroupError",
    "WrongRoundError",
    "beacon_from_json",
    "first_round_after",
    "first_round_after_time",
    "load_chain_info",
    "parse_chain_info",
    "pin_chain_info",
    "round_at",
    "start_local_beacon",
    "time_of_round",
    "verify_beacon",
]
