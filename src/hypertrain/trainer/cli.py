"""``hypertrain trainer``: inspect presets, record determinism, hash and export checkpoints.

``info --preset proxy`` prints the exact parameter count and FLOPs per token;
``determinism --threads 2`` prints this machine's determinism record (JSON);
``hash CHECKPOINT`` validates a checkpoint and prints its state hash;
``export CHECKPOINT OUT_DIR`` writes a transformers-loadable Llama directory.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hypertrain.protocol.manifest import InnerOptimSpec, ModelSpec, manifest_from_json
from hypertrain.protocol.manifest_file import manifest_document
from hypertrain.trainer.blob import decode_model_blob
from hypertrain.trainer.checkpoint import decode_checkpoint
from hypertrain.trainer.determinism import configure_determinism
from hypertrain.trainer.export import export_llama, export_tokenizer
from hypertrain.trainer.presets import flops_per_token, get_preset, param_count, with_vocab
from hypertrain.trainer.state import MAGIC, StateConfig


def _add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifest", type=Path, help="run manifest JSON that fixes the config")
    parser.add_argument("--preset", default="proxy", help="model preset (without --manifest)")
    parser.add_argument("--vocab-size", type=int, help="override the preset's vocabulary size")
    parser.add_argument(
        "--optimizer", choices=["adamw", "muon"], default="adamw", help="inner optimizer"
    )
    parser.add_argument(
        "--error-feedback", action="store_true", help="the state carries a residual"
    )


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("trainer", help="model presets, checkpoints and export")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    info = sub.add_parser("info", help="exact parameter count and FLOPs per token of a preset")
    info.add_argument("--preset", default="proxy", help="preset name")
    info.add_argument("--vocab-size", type=int, help="override the vocabulary size")
    info.add_argument("--seq-len", type=int, help="context for the attention FLOPs term")
    info.set_defaults(func=_info)

    det = sub.add_parser("determinism", help="set the switches and print the record as JSON")
    det.add_argument("--threads", type=int, default=1, help="intra-op thread count to pin")
    det.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    det.set_defaults(func=_determinism)

    hsh = sub.add_parser("hash", help="validate a checkpoint and print its state hash")
    hsh.add_argument("checkpoint", type=Path, help="checkpoint file")
    _add_config_flags(hsh)
    hsh.set_defaults(func=_hash)

    exp = sub.add_parser("export", help="export a checkpoint or model blob as a Llama directory")
    exp.add_argument("checkpoint", type=Path, help="checkpoint file or model blob")
    exp.add_argument("out_dir", type=Path, help="output directory")
    exp.add_argument("--tokenizer", type=Path, help="the run's tokenizer.json: ship it too")
    _add_config_flags(exp)
    exp.set_defaults(func=_export)


def _spec(args: argparse.Namespace) -> tuple[ModelSpec, StateConfig]:
    if args.manifest is not None:
        # a manifest file (comments allowed) or the signed envelope the service serves
        manifest = manifest_from_json(manifest_document(args.manifest.read_bytes()))
        config = StateConfig(manifest.model, manifest.inner, manifest.compression.error_feedback)
        return manifest.model, config
    model = get_preset(args.preset)
    if args.vocab_size is not None:
        model = with_vocab(model, args.vocab_size)
    config = StateConfig(model, InnerOptimSpec(name=args.optimizer), args.error_feedback)
    return model, config


def _info(args: argparse.Namespace) -> int:
    spec = get_preset(args.preset)
    if args.vocab_size is not None:
        spec = with_vocab(spec, args.vocab_size)
    flops = flops_per_token(spec, args.seq_len)
    doc = {
        "preset": spec.preset,
        "parameters": param_count(spec),
        "forward_flops_per_token": flops["forward"],
        "train_flops_per_token": flops["train"],
        "spec": spec.model_dump(mode="json"),
    }
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    return 0


def _determinism(args: argparse.Namespace) -> int:
    record = configure_determinism(args.threads, args.device)
    sys.stdout.write(json.dumps(record.model_dump(mode="json"), indent=2) + "\n")
    return 0


def _hash(args: argparse.Namespace) -> int:
    _, config = _spec(args)
    state = decode_checkpoint(args.checkpoint.read_bytes(), config)
    sys.stdout.write(f"{state.state_hash().hex()}  step {state.step}\n")
    return 0


def _export(args: argparse.Namespace) -> int:
    model, config = _spec(args)
    data = args.checkpoint.read_bytes()
    if data.startswith(MAGIC):
        params = decode_checkpoint(data, config).params()
    else:
        params = decode_model_blob(data, model)
    out = export_llama(params, model, args.out_dir)
    if args.tokenizer is not None:
        export_tokenizer(args.tokenizer, model, out)
    sys.stdout.write(f"wrote {out / 'config.json'} and {out / 'model.safetensors'}\n")
    return 0
