"""Beacon benchmarks: BLS verifications per second, and cached look-ups per second.

``verify_per_s`` runs :func:`verify_beacon` (strict decode, hash-to-curve, two-pair
pairing check, SHA-256) over the real recorded quicknet beacons on one thread.
``cached_lookup_per_s`` is ``BeaconClient.get`` for rounds already in its SQLite cache
file, so no endpoint is contacted (the one configured is unreachable on purpose).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from common import write_result
from hypertrain.beacon import QUICKNET, BeaconClient, verify_beacon
from hypertrain.beacon.cache import BeaconCache
from hypertrain.beacon.verify import verified

ASSETS = Path(__file__).parent.parent / "tests" / "assets"


def rate(fn: object, seconds: float) -> float:
    count = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        fn()  # type: ignore[operator]
        count += 1
    return count / elapsed


def main() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # the target is per core
    doc = json.loads((ASSETS / "drand_quicknet_vectors.json").read_text())
    beacons = [(b["round"], bytes.fromhex(b["signature"])) for b in doc["beacons"]]

    def verify_all() -> None:
        for round_number, signature in beacons:
            verify_beacon(QUICKNET, round_number, signature)

    verify_rate = max(rate(verify_all, 2.0) for _ in range(3)) * len(beacons)

    with tempfile.TemporaryDirectory() as tmp:
        cache_path = Path(tmp) / "beacons.sqlite"
        with BeaconCache(cache_path) as cache:
            for round_number, signature in beacons:
                cache.put(QUICKNET.chain_hash, verified(QUICKNET, round_number, signature))
        rounds = [r for r, _ in beacons]
        with BeaconClient(["http://127.0.0.1:9"], QUICKNET, cache_path) as client:

            def lookup_all() -> None:
                for round_number in rounds:
                    client.get(round_number)

            lookup_rate = max(rate(lookup_all, 1.0) for _ in range(3)) * len(rounds)

    write_result(
        "beacon",
        {"verify_per_s": round(verify_rate, 1), "cached_lookup_per_s": round(lookup_rate, 1)},
        targets={"verify_per_s": ">= 200/s on one core", "cached_lookup_per_s": "none set"},
        notes=(
            "verify: 8 real quicknet beacons, one thread, py-arkworks-bls12381 0.5.0. "
            "lookup: BeaconClient.get from a SQLite (WAL) cache file. "
            "Pinned to one core; the 2-core machine was shared with other jobs (load ~4)."
        ),
    )


if __name__ == "__main__":
    main()
