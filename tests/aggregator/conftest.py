"""Reuse the challenge service harness and the relay's loopback fixtures."""

from tests.challenge.conftest import harness, miner_keys
from tests.relay.conftest import clock, keys, relay, serve

__all__ = ["clock", "harness", "keys", "miner_keys", "relay", "serve"]
