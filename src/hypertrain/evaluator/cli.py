"""``hypertrain competition``: create a competition, evaluate submissions, read the leaderboard.

Only ``evaluate`` loads torch (and transformers); ``create`` and ``leaderboard`` are
plain HTTP calls.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hypertrain.api.competition import CompetitionClient
from hypertrain.api.errors import ServiceError
from hypertrain.competition.messages import Leaderboard
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.evaluator import spec_init
from hypertrain.protocol.cliargs import add_service_url
from hypertrain.protocol.keyargs import add_wallet_flags, key_from_args
from hypertrain.rolekit import when_up


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("competition", help="competition mode: create, evaluate, read")
    sub = parser.add_subparsers(dest="competition_command", metavar="COMMAND", required=True)
    create = sub.add_parser("create", help="create a competition from a spec JSON file")
    add_service_url(create, required=True)
    create.add_argument("--admin-token-file", type=Path, required=True, help="admin token file")
    create.add_argument(
        "--pool-dir", type=Path, required=True,
        help="a prepared dataset that is never published: the secret evaluation pool"
        " (its samples fill data.pool_root and data.pool_count)",
    )  # fmt: skip
    create.add_argument("spec", type=Path, help="competition spec (JSON)")
    create.set_defaults(func=_create)

    board = sub.add_parser("leaderboard", help="table of models, commit round, loss, weight")
    add_service_url(board, required=True)
    board.add_argument("--competition", required=True, help="competition id")
    board.add_argument("--json", action="store_true", help="print the JSON answer instead")
    board.set_defaults(func=_leaderboard)

    ev = sub.add_parser("evaluate", help="score the open cycle's models (worker)")
    add_service_url(ev, required=True)
    ev.add_argument("--competition", required=True, help="competition id")
    add_wallet_flags(ev, what="evaluator hotkey")
    ev.add_argument("--worker-token-file", type=Path, required=True, help="worker token file")
    ev.add_argument("--cache-dir", type=Path, required=True, help="where models are downloaded")
    ev.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (pinned; default 1)"
    )
    ev.add_argument("--follow", action="store_true", help="evaluate every cycle as it opens")
    ev.add_argument("--poll-s", type=float, default=1.0, help="seconds between polls (default 1)")
    ev.add_argument(
        "--time-limit-s",
        type=float,
        default=None,
        help="wall-clock seconds to score one model, at most the spec's"
        " cycle.model_time_limit_s (default: that limit, 600 unless the spec sets one)",
    )
    ev.add_argument(
        "--memory-limit-mib", type=int, default=None,
        help="address-space limit of the process scoring one model"
        " (default: 2048 plus 8 times the spec's max_bytes in MiB)",
    )  # fmt: skip
    ev.add_argument(
        "--fetch-min-rate-mib-s", type=float, default=1.0,
        help="slowest download accepted: a model's files must all arrive within"
        " --fetch-slack-s plus its declared size at this rate, or it is refused (default 1)",
    )  # fmt: skip
    ev.add_argument(
        "--fetch-slack-s", type=float, default=30.0,
        help="seconds added to every model's fetch deadline (connect, latency; default 30)",
    )  # fmt: skip
    ev.set_defaults(func=_evaluate)

    start = sub.add_parser(
        "start-model", help="turn a model directory (e.g. the winner) into a run's start model"
    )
    start.add_argument("--model-dir", type=Path, required=True, help="Llama model directory")
    start.add_argument("--out", type=Path, required=True, help="model blob file to write")
    start.set_defaults(func=_start_model)
    spec_init.register(sub)


def _read_token(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip()


def _create(args: argparse.Namespace) -> int:
    from hypertrain.competition.pool import load_pool

    spec = json.loads(args.spec.read_text(encoding="utf-8"))
    spec, pool = load_pool(spec, args.pool_dir)
    with CompetitionClient(args.service_url, admin_token=_read_token(args.admin_token_file)) as c:
        created = c.create_competition(spec, pool)
    sys.stdout.write(created.model_dump_json(exclude={"spec_envelope"}) + "\n")
    return 0


def format_leaderboard(board: Leaderboard) -> str:
    """A plain-text table, best first."""
    head = (
        f"{'rank':>4}  {'hotkey':<48}  {'commit':>7}  {'status':<9}  {'loss':>8}"
        f"  {'win':>6}  {'weight':>7}"
    )
    lines = [f"competition {board.competition_id}  (latest cycle {board.latest_cycle})", head]
    for i, c in enumerate(board.competitors, 1):
        loss = "-" if c.loss is None else f"{c.loss:.4f}"
        win = "-" if c.win_rate is None else f"{c.win_rate:.3f}"
        weight = "-" if c.weight is None else f"{c.weight:.4f}"
        lines.append(
            f"{i:>4}  {c.hotkey:<48}  {c.commit_beacon_round:>7}  {c.status:<9}  {loss:>8}"
            f"  {win:>6}  {weight:>7}"
        )
    return "\n".join(lines) + "\n"


def _leaderboard(args: argparse.Namespace) -> int:
    with CompetitionClient(args.service_url) as client:
        board = client.leaderboard(args.competition)
    sys.stdout.write(board.model_dump_json() + "\n" if args.json else format_leaderboard(board))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from hypertrain.evaluator.download import MIB, FetchLimits
    from hypertrain.evaluator.runner import (
        Evaluator,
        EvaluatorRefusedError,
        evaluate_open_cycle,
        follow,
    )
    from hypertrain.evaluator.sandbox import Limits, default_limits
    from hypertrain.evaluator.scorer import determinism_sha256, prepare

    key = key_from_args(args)
    client = CompetitionClient(args.service_url, worker_token=_read_token(args.worker_token_file))
    try:
        spec = checked_spec(client, args.competition, key.ss58_address, follow=args.follow)
        defaults = default_limits(spec)
        memory = args.memory_limit_mib
        limits = Limits(
            time_s=time_limit_s(args.time_limit_s, defaults.time_s),
            memory_bytes=defaults.memory_bytes if memory is None else memory << 20,
        )
        fetch = FetchLimits(args.fetch_min_rate_mib_s * MIB, args.fetch_slack_s)
        evaluator = Evaluator(
            client, key, spec, args.cache_dir,
            determinism_sha256(prepare(spec, args.threads)), args.threads, limits, fetch,
        )  # fmt: skip
        if args.follow:
            follow(evaluator, poll_s=args.poll_s)
        else:
            evaluate_open_cycle(evaluator)
    except (EvaluatorRefusedError, ServiceError) as exc:
        sys.stderr.write(f"evaluator: {exc}\n")
        return 1
    return 0


def time_limit_s(given: float | None, spec_limit_s: float) -> float:
    """The per-model time limit: the spec's, or a shorter one given; a longer one is
    refused (its scores could arrive after the spec's score window)."""
    if given is None:
        return spec_limit_s
    if given > spec_limit_s:
        raise ValueError(
            f"--time-limit-s {given:g} exceeds the spec's cycle.model_time_limit_s"
            f" ({spec_limit_s:g} s), which its score window is sized to: give at most that"
        )
    return given


def checked_spec(
    client: CompetitionClient, competition: str, hotkey: str, *, follow: bool
) -> CompetitionSpec:
    """The competition's spec after :func:`preflight`: at once (one-shot), or with
    ``follow`` once the service answers (a service away or failing, 5xx, is
    ``service_unreachable`` and waited for; a refusal still ends the command)."""
    from hypertrain.evaluator.runner import emit_json

    def check() -> CompetitionSpec:
        spec = client.competition(competition)
        preflight(client, spec, hotkey)
        return spec

    def waiting(exc: Exception, delay: float) -> None:
        emit_json("service_unreachable", detail=str(exc)[:300], retry_in_s=delay)

    spec = when_up(check, on_wait=waiting) if follow else check()
    assert spec is not None  # no stop is asked: a stop signal ends the process
    return spec


def preflight(client: CompetitionClient, spec: CompetitionSpec, hotkey: str) -> None:
    """Before any model is loaded: the hotkey is an evaluator and the worker token works."""
    from hypertrain.evaluator.runner import EvaluatorRefusedError

    if spec.evaluators and hotkey not in spec.evaluators:
        raise EvaluatorRefusedError(
            f"{hotkey} is not among the evaluators of competition {spec.competition_id}"
            " (the spec's `evaluators`): sign with one of them, or create the competition"
            " with this hotkey listed"
        )
    try:
        client.task(spec.competition_id, hotkey)  # a worker route: checks the token
    except ServiceError as exc:
        if exc.status == 401:
            raise EvaluatorRefusedError(
                f"the service at {client.base_url} refused the worker token (401):"
                " --worker-token-file must hold the service's CHALLENGE_WORKER_TOKEN_FILE token"
            ) from None
        if exc.status == 403:
            raise EvaluatorRefusedError(
                f"the service at {client.base_url} refused evaluator {hotkey} (403): {exc}"
            ) from None
        raise


def _start_model(args: argparse.Namespace) -> int:
    from hypertrain.trainer.blob import blob_hash, encode_model_blob
    from hypertrain.trainer.export import import_llama

    params, spec = import_llama(args.model_dir)
    blob = encode_model_blob(params, spec)
    args.out.write_bytes(blob)
    doc = {"model": spec.model_dump(mode="json"), "sha256": blob_hash(blob), "out": str(args.out)}
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
    return 0
