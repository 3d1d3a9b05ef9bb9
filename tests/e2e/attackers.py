"""Attacker islands for network tests, built from the miner library.

``python -m tests.e2e.attackers STRATEGY --round W -- MINER-ARGS...`` runs
``hypertrain-miner MINER-ARGS`` (``run --follow``) in this process, cheating in round
``W`` by ``STRATEGY`` and sitting out every other round. Each attacker signs and posts
real envelopes and uploads real blobs with its own key:

* ``moments``: Adam moments of its own choosing written into checkpoint 0, then honest
  training (the start-state attack); it serves its audited checkpoints as usual.
* ``bad-ref``: a commit whose checkpoint reference is not a blob address.
* ``nested-index``: a checkpoint index of deeply nested JSON, uploaded and committed.
* ``x1000``: its honest update scaled by 1000.
* ``ghost``: commits the right update hash but never uploads the update.
* ``copy``: trains nothing; commits the body of another island's commit (``--victim``)
  as soon as it is public.
* ``honest``: the honest miner, sitting out every round but ``W``.

``python -m tests.e2e.attackers join -- --config A.toml --config B.toml ...`` joins
several islands from one process (``hypertrain-miner join`` for each, concurrently).

``python -m tests.e2e.attackers dispute-elsewhere --round W -- watch MINER-ARGS...``
waits for the island's round-``W`` mismatch verdict and disputes it on an audited
segment the verdict does not name as the first that differs (an honest one), through
the miner's own :func:`~hypertrain.miner.disputes.open_dispute` with the island's key
and the leaves it committed; it prints the service's answer (``dispute_refused`` with
the refusal's code, or ``dispute_opened``) and exits.

The production miner carries none of this: the changes are injected here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hypertrain.api.client import ChallengeClient
from hypertrain.miner import actions
from hypertrain.miner import cli as miner_cli
from hypertrain.miner import run as run_mod
from hypertrain.miner.config import MinerConfig
from hypertrain.miner.context import load_run
from hypertrain.miner.disputes import open_dispute, stored_leaves
from hypertrain.miner.errors import MinerError
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.messages import Commit, Verdict
from hypertrain.trainer import update as update_mod
from tests.auditor.islands import inject_moments
from tests.e2e.launch import wait_for

STRATEGIES = ("moments", "bad-ref", "nested-index", "x1000", "ghost", "copy", "honest")
NESTED = b"[" * 200_000 + b"]" * 200_000


def _only_round(target: int) -> None:
    """Sit out every round but ``target`` (the follow loop marks them done)."""
    honest_run_round = vars(actions)["run_round"]

    def run_round(ctx: Any, key: Any, index: int, *args: Any, **kwargs: Any) -> Any:
        if index != target:
            raise MinerError(f"attacker sits out round {index}")
        return honest_run_round(ctx, key, index, *args, **kwargs)

    vars(actions)["run_round"] = run_round  # the follow loop looks it up at call time


def install(strategy: str) -> None:
    """Replace the miner's steps named by ``strategy`` in this process."""
    if strategy == "moments":
        honest_start = run_mod.start_state

        def start_state(*args: Any, **kwargs: Any) -> Any:
            return inject_moments(0.05)(honest_start(*args, **kwargs))

        run_mod.start_state = start_state
    elif strategy == "x1000":
        honest_delta = update_mod.pseudo_gradient

        def pseudo_gradient(start: Any, end: Any) -> Any:
            return {k: v * 1000.0 for k, v in honest_delta(start, end).items()}

        update_mod.pseudo_gradient = pseudo_gradient
    elif strategy in ("bad-ref", "nested-index"):
        honest_post = run_mod._post_commit

        def post_commit(ctx: Any, key: Any, body: Commit, expiry: int) -> Any:
            url = ctx.config.relay_url.rstrip("/") + "/blobs/../../etc/passwd"
            if strategy == "nested-index":
                from hypertrain.relay.client import RelayClient

                with RelayClient(ctx.config.relay_url, key, ctx.manifest.run_id) as relay:
                    sha = relay.put(NESTED, kind="other", round=body.round, expiry_round=expiry)
                    url = relay.url(sha)
            return honest_post(ctx, key, body.model_copy(update={"checkpoint_url": url}), expiry)

        run_mod._post_commit = post_commit
    elif strategy == "ghost":

        def upload(
            relay: Any, result: Any, update: bytes, index: int, expiry: int, carried: Any
        ) -> Any:
            from hypertrain.evidence.index import CheckpointIndex
            from hypertrain.miner.checkpoints import checkpoint_addresses

            blobs = checkpoint_addresses(result.checkpoint_paths)
            named = checkpoint_addresses([carried])[0] if carried is not None else None
            idx = CheckpointIndex(index, tuple(x.hex() for x in result.leaves), blobs, named)
            index_sha = relay.put(idx.to_bytes(), kind="other", round=index, expiry_round=expiry)
            return index_sha, hashlib.sha256(update).hexdigest()  # the update stays here

        run_mod._upload = upload


def copy_commit(config: MinerConfig, victim: str, index: int, timeout_s: float) -> int:
    """Commit ``victim``'s round-``index`` commit body under this key once it is public."""
    key = config.load_key()
    sys.stdout.write(f'{{"event": "started", "hotkey": "{key.ss58_address}"}}\n')
    sys.stdout.flush()
    deadline = time.monotonic() + timeout_s
    with ChallengeClient(config.service_url) as service:
        while time.monotonic() < deadline:
            try:
                detail = service.round_detail(config.run_id, index)
            except (OSError, ValueError):
                detail = None
            found = (
                None
                if detail is None
                else next((c for c in detail.commits if c.signer == victim), None)
            )
            if found is not None:
                body = Commit.model_validate(found.body).model_copy(update={"train_loss": None})
                env = seal(
                    key,
                    domain="commit",
                    run_id=config.run_id,
                    body=body.model_dump(mode="json"),
                    expiry_round=service.beacon_round() + 300,
                )
                answer = service.commit(env)
                sys.stdout.write(f'{{"event": "copied", "round": {index}, "answer": "{answer}"}}\n')
                return 0
            time.sleep(0.3)
    sys.stderr.write(f"no commit of {victim} in round {index} within {timeout_s:.0f}s\n")
    return 1


def _judged(
    service: ChallengeClient, config: MinerConfig, hotkey: str, index: int, timeout_s: float
) -> tuple[Commit, str, Verdict] | None:
    """This island's round-``index`` commit and the first fault verdict on it, once public."""

    def found() -> tuple[Commit, str, Verdict] | None:
        commit, verdicts = actions._mine(service.round_detail(config.run_id, index), hotkey)
        faults = [(vid, v) for vid, v in verdicts if v.result != "match"]
        return (commit, *faults[0]) if commit is not None and faults else None

    try:
        return wait_for(found, timeout_s, f"a fault verdict on round {index}", poll_s=0.3)
    except AssertionError:
        return None


def dispute_elsewhere(config: MinerConfig, index: int, timeout_s: float) -> int:
    """Dispute the round-``index`` verdict on this island on an audited segment other
    than the one its first differing leaf names; print the service's answer."""
    key = config.load_key()
    sys.stdout.write(f'{{"event": "started", "hotkey": "{key.ss58_address}"}}\n')
    sys.stdout.flush()
    with ChallengeClient(config.service_url) as service:
        ctx = load_run(config, service, check=False)
        found = _judged(service, config, key.ss58_address, index, timeout_s)
        if found is None:
            sys.stderr.write(f"no fault verdict on round {index} within {timeout_s:.0f}s\n")
            return 1
        commit, verdict_id, verdict = found
        first = verdict.first_bad_leaf
        honest = [s for s in verdict.segments if first is None or s != first - 1]
        if verdict.check != "segment" or not honest:
            sys.stderr.write(f"no honest audited segment to dispute: {verdict}\n")
            return 1
        leaves = stored_leaves(ctx, index, commit.leaf_count)
        opened = open_dispute(ctx, key, verdict_id, index, honest[0], leaves)
    event = "dispute_opened" if opened.dispute_id else "dispute_refused"
    doc = {"event": event, "round": index, "segment": honest[0], "first_bad_leaf": first}
    doc |= {"verdict_id": verdict_id, "refusal": opened.refusal, "dispute_id": opened.dispute_id}
    sys.stdout.write(json.dumps(doc) + "\n")
    return 0


def join_all(argv: list[str]) -> int:
    """``join MINER-ARGS...`` once per ``--config``, concurrently, in one process (one
    torch import for every island; each join runs the admission workload)."""
    configs = [argv[i + 1] for i, a in enumerate(argv) if a == "--config"]
    rest = [a for i, a in enumerate(argv) if a != "--config" and argv[i - 1 : i] != ["--config"]]
    parser = miner_cli.build_parser()
    spaces = [parser.parse_args(["join", "--config", c, *rest]) for c in configs]
    with ThreadPoolExecutor(max_workers=len(spaces) or 1) as pool:
        codes = list(pool.map(actions.join_cmd, spaces))
    return max(codes, default=0)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    ours, rest = argv[:split], argv[split + 1 :]
    if ours[:1] == ["join"]:
        return join_all(rest)
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.attackers")
    parser.add_argument("strategy", choices=(*STRATEGIES, "dispute-elsewhere"))
    parser.add_argument("--round", type=int, required=True, help="the round to cheat in")
    parser.add_argument("--victim", help="copy: the SS58 hotkey whose commit is copied")
    args = parser.parse_args(ours)
    if args.strategy == "copy":
        ns = miner_cli.build_parser().parse_args(rest)
        return copy_commit(actions._config(ns), args.victim, args.round, 600)
    if args.strategy == "dispute-elsewhere":
        ns = miner_cli.build_parser().parse_args(rest)
        return dispute_elsewhere(actions._config(ns), args.round, 600)
    _only_round(args.round)
    install(args.strategy)
    return miner_cli.main(rest)


if __name__ == "__main__":
    sys.exit(main())
