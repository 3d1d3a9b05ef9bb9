"""Regenerate the JSON Schemas of every wire message: ``python -m hypertrain.protocol.schema DIR``.

One file per envelope domain (``<domain>.schema.json``) plus the envelope itself and
the run manifest. ``make docs`` (``hypertrain.ops.docs``) writes these together with
the dispute and competition schemas and the route index; a test fails on drift.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic import BaseModel

from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import DOMAINS


def base_models() -> dict[str, type[BaseModel]]:
    """The protocol's own documented models: the envelope, the manifest, every domain."""
    models: dict[str, type[BaseModel]] = {"envelope": Envelope, "run-manifest": RunManifest}
    models.update(DOMAINS)
    return models


def schema_texts(models: dict[str, type[BaseModel]]) -> dict[str, str]:
    """File name -> schema text (stable formatting, trailing newline) for ``models``."""
    return {
        f"{name}.schema.json": json.dumps(model.model_json_schema(), indent=2, sort_keys=True)
        + "\n"
        for name, model in sorted(models.items())
    }


def all_schemas() -> dict[str, str]:
    """The protocol's schemas (``make docs`` adds the dispute and competition ones)."""
    return schema_texts(base_models())


def write_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in all_schemas().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m hypertrain.protocol.schema OUTPUT_DIR\n")
        return 2
    for path in write_schemas(Path(args[0])):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
