"""Attackers on the robust merge, for network tests: each signs and uploads real blobs.

``python -m tests.e2e.merge_attackers STRATEGY --round W [--victim SS58 ...] -- MINER-ARGS``

* ``noisy``: trains nothing; once ``--victim``'s update is on the relay it uploads that
  update plus noise (cosine about 0.98) and commits it under its own key.
* ``average``: trains nothing; uploads the mean of two victims' updates.
* ``reversed``: the honest miner, sitting out every round but ``W``, whose update in
  ``W`` is its own honest pseudo-gradient negated.

The production miner carries none of this: the changes are injected here.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from hypertrain.api.client import ChallengeClient
from hypertrain.miner import actions
from hypertrain.miner import cli as miner_cli
from hypertrain.miner.config import MinerConfig
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.messages import Commit
from hypertrain.relay.client import RelayClient
from hypertrain.trainer import update as update_mod
from tests.e2e.attackers import _only_round

Tensors = dict[str, Tensor]


def _noisy(updates: list[Tensors]) -> Tensors:
    gen = torch.Generator().manual_seed(5)
    a = updates[0]
    return {k: v + torch.randn(v.shape, generator=gen) * 0.2 * v.std() for k, v in a.items()}


def _average(updates: list[Tensors]) -> Tensors:
    return {k: sum(u[k] for u in updates) / len(updates) for k in updates[0]}


MAKERS: dict[str, Callable[[list[Tensors]], Tensors]] = {"noisy": _noisy, "average": _average}


def _victim_commits(service: ChallengeClient, run_id: str, index: int, victims: list[str]) -> Any:
    try:
        detail = service.round_detail(run_id, index)
    except (OSError, ValueError):
        return None
    found = {c.signer: Commit.model_validate(c.body) for c in detail.commits}
    return [found[v] for v in victims] if all(v in found for v in victims) else None


def derived_commit(config: MinerConfig, strategy: str, victims: list[str], index: int) -> int:
    """Upload an update made from the victims' public updates and commit it as our own."""
    key = config.load_key()
    sys.stdout.write(f'{{"event": "started", "hotkey": "{key.ss58_address}"}}\n')
    sys.stdout.flush()
    deadline = time.monotonic() + 600
    with (
        ChallengeClient(config.service_url) as service,
        RelayClient(config.relay_url, key, config.run_id) as relay,
    ):
        manifest = service.manifest(config.run_id)
        while time.monotonic() < deadline:
            commits = _victim_commits(service, config.run_id, index, victims)
            if commits is None or not all(relay.exists(c.update_sha256) for c in commits):
                time.sleep(0.3)
                continue
            updates = [
                update_mod.decode_update(relay.get(c.update_sha256), manifest.compression)
                for c in commits
            ]
            data = update_mod.encode_update(MAKERS[strategy](updates), manifest.compression)
            expiry = service.beacon_round() + 300
            sha = relay.put(data, kind="update", round=index, expiry_round=expiry)
            # a root of its own: one shared with the victim would audit both (an exact copy)
            root = hashlib.sha256(key.public_key + index.to_bytes(8, "big")).hexdigest()
            body = commits[0].model_copy(
                update={"update_sha256": sha, "update_bytes": len(data), "checkpoint_root": root,
                        "update_url": relay.url(sha), "train_loss": None}
            )  # fmt: skip
            env = seal(key, domain="commit", run_id=config.run_id,
                       body=body.model_dump(mode="json"), expiry_round=expiry)  # fmt: skip
            sys.stdout.write(f'{{"event": "derived", "answer": "{service.commit(env)}"}}\n')
            return 0
    sys.stderr.write(f"no updates of {victims} in round {index}\n")
    return 1


def install_reversed() -> None:
    honest_delta = update_mod.pseudo_gradient

    def pseudo_gradient(start: Any, end: Any) -> Any:
        return {k: -v for k, v in honest_delta(start, end).items()}

    update_mod.pseudo_gradient = pseudo_gradient


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    ours, rest = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.merge_attackers")
    parser.add_argument("strategy", choices=(*MAKERS, "reversed"))
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--victim", action="append", default=[])
    args = parser.parse_args(ours)
    if args.strategy in MAKERS:
        ns = miner_cli.build_parser().parse_args(rest)
        return derived_commit(actions._config(ns), args.strategy, args.victim, args.round)
    _only_round(args.round)
    install_reversed()
    return miner_cli.main(rest)


if __name__ == "__main__":
    sys.exit(main())
