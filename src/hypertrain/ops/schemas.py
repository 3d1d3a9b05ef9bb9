"""Every wire message's JSON Schema: ``python -m hypertrain.ops.schemas DIR``.

One file per signed-message domain (the protocol's, the dispute game's and the
competition's) plus the envelope, the run manifest and the competition spec, from their
pydantic models. ``make docs`` writes the same files into ``docs/schemas`` through
:func:`write_schemas`, so the command and the checked-in set never differ. The set is
assembled here, above the packages whose models it documents: the protocol layer cannot
import the dispute and competition models.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import BaseModel

from hypertrain.competition.messages import (
    COMMIT_DOMAIN,
    REVEAL_DOMAIN,
    SCORE_DOMAIN,
    CompeteCommit,
    CompeteReveal,
    CompeteScore,
)
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.dispute.messages import DOMAINS as DISPUTE_DOMAINS
from hypertrain.protocol.schema import base_models, schema_texts


def schema_models() -> dict[str, type[BaseModel]]:
    """Every documented wire model by schema name (the envelope domain where it has one)."""
    models = base_models()
    models.update(DISPUTE_DOMAINS)
    models.update({COMMIT_DOMAIN: CompeteCommit, REVEAL_DOMAIN: CompeteReveal})
    models.update({SCORE_DOMAIN: CompeteScore, "competition-spec": CompetitionSpec})
    return models


def schema_files() -> dict[str, str]:
    """File name -> schema text of every documented wire model."""
    return schema_texts(schema_models())


def write_schemas(directory: Path) -> list[Path]:
    """Write every schema file into ``directory`` (created if absent); the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schema_files().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hypertrain.ops.schemas",
        description="Write the JSON Schema of every wire message (the set `make docs` writes).",
    )
    parser.add_argument("directory", type=Path, help="output directory (created if absent)")
    args = parser.parse_args(argv)
    for path in write_schemas(args.directory):
        sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
