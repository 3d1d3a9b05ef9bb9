"""Print the pinned dependencies of pyproject.toml as a pip requirements file.

The images install exactly the pins the project declares, minus what an image leaves
out: ``--exclude torch`` for the server image (the challenge service and the relay never
import torch), ``--only torch`` for the GPU image's torch layer.

    python3 pyproject_deps.py pyproject.toml --exclude torch > requirements.txt
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def requirement_name(requirement: str) -> str:
    """The normalised project name of a requirement string (PEP 503)."""
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def select(pyproject: Path, *, exclude: set[str], only: set[str], extras: list[str]) -> list[str]:
    """The project's dependencies (plus ``extras``), filtered by normalised name."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project.get("dependencies", []))
    for extra in extras:
        requirements += project.get("optional-dependencies", {})[extra]
    chosen = []
    for requirement in requirements:
        name = requirement_name(requirement)
        if name in exclude or (only and name not in only):
            continue
        chosen.append(requirement)
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyproject", type=Path)
    parser.add_argument("--exclude", action="append", default=[], help="leave this one out")
    parser.add_argument("--only", action="append", default=[], help="keep only these")
    parser.add_argument("--extra", action="append", default=[], help="add an extra's pins")
    args = parser.parse_args(argv)
    norm = {requirement_name(n) for n in args.exclude}
    only = {requirement_name(n) for n in args.only}
    for line in select(args.pyproject, exclude=norm, only=only, extras=args.extra):
        sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
