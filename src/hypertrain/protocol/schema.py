"""The JSON Schemas of the protocol's own wire messages, as text.

One schema per envelope domain (``<domain>.schema.json``) plus the envelope itself and
the run manifest. The command that writes every wire message's schema, these together
with the dispute and competition ones, is ``python -m hypertrain.ops.schemas DIR``
(``make docs`` writes the same set into docs/schemas; a test fails on drift): it lives
above this layer, which cannot import the dispute and competition models.
"""

from __future__ import annotations

import json
import sys

from pydantic import BaseModel

from hypertrain.protocol.envelope import Envelope
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import DOMAINS

MOVED = (
    "the schemas are written by `python -m hypertrain.ops.schemas DIR` (every wire"
    " message's, the set `make docs` writes)"
)


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


def main(argv: list[str] | None = None) -> int:
    """The command this module used to be: it wrote only the protocol's part of the set."""
    sys.stderr.write(f"error: {MOVED}\n")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
