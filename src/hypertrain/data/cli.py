"""``hypertrain data``: build and inspect datasets.

``train-tokenizer`` trains a deterministic byte-level BPE and prints its SHA-256;
``prepare`` turns a corpus into shards plus ``dataset.json`` and prints the root;
``verify`` re-hashes a dataset; ``info`` prints its summary and the manifest's
``data`` section; ``assign`` computes one round's assignment from public inputs;
``serve`` publishes a dataset to miners and ``fetch`` downloads and checks one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hypertrain.data.assignment import EpochState, assign_round, derive_assignment_key
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.data.errors import DataError
from hypertrain.data.prepare import DEFAULT_SAMPLES_PER_SHARD, PrepareOptions, prepare
from hypertrain.data.scores import ScoreFilter
from hypertrain.data.tokenizer import load_tokenizer, train_tokenizer, write_tokenizer
from hypertrain.protocol.canonical import canonical_bytes, parse_json
from hypertrain.protocol.cliargs import add_data_url
from hypertrain.protocol.listen import ensure_port_free


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("data", help="tokenizer, dataset shards, root, assignment")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_train_tokenizer(sub)
    _add_prepare(sub)
    verify = sub.add_parser("verify", help="re-hash every shard and sample of a dataset")
    verify.add_argument("descriptor", type=Path, help="path to dataset.json")
    verify.add_argument("--descriptor-sha256", help="require this descriptor hash")
    verify.set_defaults(func=_verify)
    info = sub.add_parser("info", help="print a dataset's summary and manifest data section")
    info.add_argument("descriptor", type=Path, help="path to dataset.json")
    info.set_defaults(func=_info)
    _add_assign(sub)
    _add_publish(sub)


def _add_publish(sub: Any) -> None:
    serve = sub.add_parser("serve", help="publish a prepared dataset to miners over HTTP")
    serve.add_argument("--dataset-dir", type=Path, required=True, help="prepared dataset dir")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind")
    serve.add_argument("--port", type=int, default=8471, help="port to bind (0 = any free)")
    serve.add_argument("--ready-file", type=Path, help="write {url, dataset_root} here once up")
    serve.set_defaults(func=_serve)
    fetch = sub.add_parser("fetch", help="download a published dataset and check its root")
    add_data_url(fetch, required=True)
    pin = fetch.add_mutually_exclusive_group(required=True)
    pin.add_argument("--dataset-root", help="the root the run manifest pins")
    pin.add_argument("--manifest-url", help="take the root from this signed run manifest")
    fetch.add_argument("--coordinator", help="SS58 that must have signed the manifest")
    fetch.add_argument("--descriptor-sha256", help="also require this descriptor hash")
    fetch.add_argument("--out", type=Path, required=True, help="local dataset directory")
    fetch.set_defaults(func=_fetch)


def _serve(args: argparse.Namespace) -> int:
    from hypertrain.data.publish import make_server, ready_doc

    ensure_port_free(args.host, args.port, what="the dataset server")
    server = make_server(args.dataset_dir, args.host, args.port)
    root = Dataset(args.dataset_dir / DESCRIPTOR_NAME).descriptor.dataset_root
    doc = ready_doc(server, root)
    if args.ready_file is not None:
        args.ready_file.write_text(doc + "\n", encoding="utf-8")
    sys.stdout.write(f"serving dataset {root}: {json.loads(doc)['url']}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from hypertrain.data.publish import fetch_dataset

    root, descriptor_sha = args.dataset_root, args.descriptor_sha256
    if args.manifest_url is not None:
        from hypertrain.data.publish import pinned_by_manifest

        root, descriptor_sha = pinned_by_manifest(args.manifest_url, args.coordinator)
    ds = fetch_dataset(args.data_url, args.out, dataset_root=root, descriptor_sha256=descriptor_sha)
    sys.stdout.write(f"OK: {ds.sample_count} samples under root {ds.descriptor.dataset_root}\n")
    return 0


def _add_train_tokenizer(sub: Any) -> None:
    cmd = sub.add_parser("train-tokenizer", help="train a deterministic byte-level BPE")
    cmd.add_argument("inputs", type=Path, nargs="+", help="corpus files (.txt/.jsonl/.parquet)")
    cmd.add_argument("--vocab-size", type=int, required=True, help="vocabulary size")
    cmd.add_argument("--min-frequency", type=int, default=2, help="minimum pair count to merge")
    cmd.add_argument("--out", type=Path, required=True, help="where to write tokenizer.json")
    cmd.set_defaults(func=_train_tokenizer)


def _add_prepare(sub: Any) -> None:
    cmd = sub.add_parser("prepare", help="tokenize, pack and shard a corpus")
    cmd.add_argument("inputs", type=Path, nargs="+", help="corpus files (.txt/.jsonl/.parquet)")
    cmd.add_argument("--tokenizer", type=Path, required=True, help="tokenizer.json")
    cmd.add_argument("--tokenizer-sha256", help="refuse a tokenizer with another hash")
    cmd.add_argument("--seq-len", type=int, required=True, help="tokens per sample")
    cmd.add_argument("--out", type=Path, required=True, help="empty output directory")
    cmd.add_argument("--heldout-fraction", type=float, default=0.01, help="held-out share")
    cmd.add_argument(
        "--samples-per-shard", type=int, default=DEFAULT_SAMPLES_PER_SHARD, help="shard size"
    )
    cmd.add_argument(
        "--empty-documents",
        choices=["count", "error"],
        default="count",
        help="drop and count empty documents, or refuse them",
    )
    score = cmd.add_mutually_exclusive_group()
    score.add_argument(
        "--min-int-score", type=int, help="keep rows with int_score >= N (FineWeb-Edu: 3)"
    )
    score.add_argument("--min-score", type=float, help="keep rows with score >= X")
    cmd.set_defaults(func=_prepare)


def _add_assign(sub: Any) -> None:
    cmd = sub.add_parser("assign", help="compute a round's sample assignment")
    cmd.add_argument("descriptor", type=Path, help="path to dataset.json")
    cmd.add_argument("--run-id", required=True, help="run id from the manifest")
    cmd.add_argument("--round", type=int, required=True, help="round number")
    cmd.add_argument("--randomness", required=True, help="round-open beacon randomness (hex)")
    cmd.add_argument("--roster", type=Path, required=True, help='JSON [["hotkey", n], ...]')
    cmd.add_argument("--state", type=Path, help="epoch state JSON after the previous round")
    cmd.set_defaults(func=_assign)


def _train_tokenizer(args: argparse.Namespace) -> int:
    data = train_tokenizer(args.inputs, args.vocab_size, min_frequency=args.min_frequency)
    digest = write_tokenizer(data, args.out)
    sys.stdout.write(f"tokenizer_sha256 {digest}\n")
    return 0


def _score_filter(args: argparse.Namespace) -> ScoreFilter | None:
    if args.min_int_score is not None:
        return ScoreFilter("int_score", args.min_int_score)
    if args.min_score is not None:
        return ScoreFilter("score", args.min_score)
    return None


def _prepare(args: argparse.Namespace) -> int:
    tok = load_tokenizer(args.tokenizer, args.tokenizer_sha256)
    opts = PrepareOptions(
        heldout_fraction=args.heldout_fraction,
        samples_per_shard=args.samples_per_shard,
        empty_policy=args.empty_documents,
        score_filter=_score_filter(args),
    )
    desc = prepare(args.inputs, tok, args.seq_len, args.out, opts)
    # the tokenizer travels with the dataset: data serve publishes it, exports ship it
    from hypertrain.data.publish import copy_tokenizer

    copy_tokenizer(args.tokenizer, args.out)
    c = desc.corpus
    sys.stdout.write(
        f"dataset_root      {desc.dataset_root}\n"
        f"descriptor_sha256 {desc.sha256()}\n"
        f"samples           {desc.sample_count} ({desc.split.heldout_count} held out)\n"
        f"documents         {c.documents} (empty, dropped: {c.empty_documents})\n"
        f"score filter      {c.score_filter or 'none'} (dropped: {c.filtered_documents})\n"
        f"tokens            {c.tokens} (tail dropped: {c.tail_tokens_dropped})\n"
        f"descriptor        {args.out / DESCRIPTOR_NAME}\n"
    )
    return 0


def _verify(args: argparse.Namespace) -> int:
    ds = Dataset(args.descriptor, expected_sha256=args.descriptor_sha256)
    ds.verify()
    sys.stdout.write(f"OK: {ds.sample_count} samples under root {ds.descriptor.dataset_root}\n")
    return 0


def _info(args: argparse.Namespace) -> int:
    ds = Dataset(args.descriptor)
    d = ds.descriptor
    summary = {
        "data_spec": d.data_spec().model_dump(mode="json"),
        "split": d.split.model_dump(mode="json"),
        "corpus": d.corpus.model_dump(mode="json", exclude={"sources"}),
        "shards": len(d.shards),
        "token_dtype": d.token_dtype,
        "vocab_size": d.vocab_size,
    }
    sys.stdout.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return 0


def _parse_roster(value: Any) -> list[tuple[str, int]]:
    if not isinstance(value, list) or not all(
        isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) for e in value
    ):
        raise DataError('roster must be a JSON list of ["hotkey", n_samples] pairs')
    return [(e[0], e[1]) for e in value]


def _assign(args: argparse.Namespace) -> int:
    ds = Dataset(args.descriptor)
    try:
        randomness = bytes.fromhex(args.randomness)
    except ValueError as exc:
        raise DataError("--randomness must be hex") from exc
    key = derive_assignment_key(args.run_id, args.round, randomness)
    roster = _parse_roster(parse_json(args.roster.read_bytes()))
    state = EpochState.from_json(parse_json(args.state.read_bytes())) if args.state else None
    result = assign_round(key, roster, ds.split(), state)
    out = {
        "assignment_key": key.hex(),
        "epoch_started": result.epoch_started,
        "islands": {h: [int(i) for i in ids] for h, ids in result.islands},
        "state": result.state.to_json(),
    }
    sys.stdout.buffer.write(canonical_bytes(out) + b"\n")
    return 0
