"""``hypertrain competition init``: a competition spec from a prepared dataset.

Like ``hypertrain run init`` for a run manifest: the ``data`` section pins the public
dataset (root, descriptor and tokenizer hashes, sample length) and the architecture's
vocabulary comes from its tokenizer; the values in ``_FLAGS`` have a flag, and the file
leaves every other field out, at the spec's default (edit it by hand to change one). The
secret pool's ``pool_root`` and ``pool_count`` are left out: ``competition create
--pool-dir`` fills them from the pool it sends. The spec is validated before it is
written, so a value the service would refuse is refused here, naming the field.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hypertrain.competition.spec import (
    MODEL_TIME_LIMIT_S,
    CompetitionSpec,
    CycleSpec,
    check_score_window,
)
from hypertrain.data.descriptor import DESCRIPTOR_NAME, read_descriptor
from hypertrain.protocol.deadlines import QUICKNET_PERIOD_S
from hypertrain.protocol.errors import DeadlineError

# (flag, section, field, type, default, help), in the order --help lists them
_FLAGS: tuple[tuple[str, str, str, type, object, str], ...] = (
    ("--min-params", "architecture", "min_params", int, 1, "fewest parameters of a model"),
    ("--max-params", "architecture", "max_params", int, 1_000_000_000, "most parameters"),
    ("--max-bytes", "architecture", "max_bytes", int, 8 << 30, "most bytes of a model's files"),
    ("--max-context-length", "architecture", "max_context_length", int, 4096,
     "largest context length a model may declare"),
    ("--pages-per-eval", "data", "pages_per_eval", int, 64, "pool samples scored per cycle"),
    ("--batch-pages", "data", "batch_pages", int, 8, "pages per batch (the same for all)"),
    ("--epsilon", "epsilon", "start", float, 0.005, "advantage of the older model of a pair"),
    ("--eligibility-delay-rounds", "cycle", "eligibility_delay_rounds", int, 10,
     "beacon rounds between a commitment and its first cycle"),
    ("--eval-interval-rounds", "cycle", "eval_interval_rounds", int, 20,
     "beacon rounds between cycles"),
    ("--score-window-rounds", "cycle", "score_window_rounds", int,
     CycleSpec().score_window_rounds,
     "beacon rounds evaluators have to answer a cycle; at least --model-time-limit-s"),
    ("--model-time-limit-s", "cycle", "model_time_limit_s", float, MODEL_TIME_LIMIT_S,
     "seconds an evaluator may take to score one model"),
    ("--pool-per-cycle", "reward", "pool_per_cycle", int, 1_000_000_000,
     "integer reward minted per cycle (base units)"),
)  # fmt: skip


class SpecInitError(ValueError):
    """The options do not make a spec the service would accept."""


def register(sub: Any) -> None:
    """Add ``init`` to the ``competition`` group."""
    init = sub.add_parser(
        "init", help="a competition spec from a prepared dataset (other fields at their defaults)"
    )
    init.add_argument("--competition-id", required=True, help="the competition's name")
    init.add_argument(
        "--dataset-dir", type=Path, required=True,
        help="the public dataset miners train on (its tokenizer is the competition's)",
    )  # fmt: skip
    init.add_argument(
        "--evaluator", action="append", default=[], metavar="SS58",
        help="an evaluator's SS58 address (repeat for each); none: the service's"
        " HYPERTRAIN_EVALUATOR_HOTKEYS score, and create is refused when that is empty too",
    )  # fmt: skip
    for flag, _, dest, kind, default, text in _FLAGS:
        init.add_argument(flag, dest=dest, type=kind, default=default,
                          help=f"{text} (default %(default)s)")  # fmt: skip
    init.add_argument(
        "--eval-dtype", choices=("float32", "bfloat16"), default="float32",
        help="the dtype evaluators run models in (default %(default)s; left out of the file"
        " at the default)",
    )  # fmt: skip
    init.add_argument("--out", type=Path, required=True, help="spec file to write")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(func=_init)


def build_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The spec document (without the pool fields) for ``args``, validated."""
    descriptor = read_descriptor(args.dataset_dir / DESCRIPTOR_NAME)
    data = descriptor.data_spec()
    doc: dict[str, Any] = {
        "competition_id": args.competition_id,
        "architecture": {"vocab_size": descriptor.vocab_size},
        "data": {
            "dataset_root": data.dataset_root,
            "descriptor_sha256": data.descriptor_sha256,
            "tokenizer_sha256": data.tokenizer_sha256,
            "seq_len": data.seq_len,
        },
        "epsilon": {"kind": "constant"},
        "cycle": {},
        "reward": {},
        "evaluators": list(args.evaluator),
    }
    for _, section, dest, _, _, _ in _FLAGS:
        doc[section][dest] = getattr(args, dest)
    doc["epsilon"]["end"] = doc["epsilon"]["start"]
    if (dtype := getattr(args, "eval_dtype", "float32")) != "float32":
        doc["data"]["eval_dtype"] = dtype
    probe = {**doc, "data": {**doc["data"], "pool_root": "0" * 64, "pool_count": 1 << 24}}
    try:
        spec = CompetitionSpec.model_validate(probe)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "spec"
        raise SpecInitError(f"{where}: {first['msg']}") from None
    try:  # the service checks it again on its own beacon
        check_score_window(spec, QUICKNET_PERIOD_S)
    except DeadlineError as exc:
        raise SpecInitError(str(exc)) from None
    return doc


def _init(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.force:
        raise SpecInitError(f"{args.out} exists (pass --force to overwrite it)")
    doc = build_spec(args)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    who = ", ".join(doc["evaluators"]) or "the service's HYPERTRAIN_EVALUATOR_HOTKEYS"
    sys.stdout.write(
        f"wrote {args.out}: competition {args.competition_id}, evaluators {who}\n"
        f"create it with: hypertrain competition create --service-url URL"
        f" --admin-token-file FILE --pool-dir POOL {args.out}\n"
    )
    return 0
