"""How a submitted model directory is named: its file list, model hash and commitment.

A submission is a directory of ``config.json`` plus one or more ``*.safetensors``
files. Its *model hash* is the tagged hash of the canonical JSON list of
``{name, sha256, size}`` sorted by name, so it is independent of upload order and
of the relay. The *commitment* a miner signs first is the tagged hash of the model
hash bound to its own hotkey: nobody can commit a model before holding its bytes,
and copying a revealed model gives the copier a later commitment.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.domains import COMPETE_COMMITMENT, COMPETE_MODEL, tagged_hash

CONFIG_NAME: Final = "config.json"
FILE_NAME = re.compile(r"^(config\.json|[A-Za-z0-9_.-]{1,120}\.safetensors)$")
MAX_FILES: Final = 64


class SubmissionError(ValueError):
    """A submission (directory, file list or commitment) is malformed or out of spec."""


class ModelFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=FILE_NAME.pattern)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=1, le=1 << 40)


def check_file_list(files: list[ModelFile]) -> list[ModelFile]:
    """Sorted, unique names; exactly one config.json and at least one safetensors file."""
    names = [f.name for f in files]
    if len(names) != len(set(names)):
        raise SubmissionError("a file name appears twice in the submission")
    if len(files) > MAX_FILES:
        raise SubmissionError(f"a submission has at most {MAX_FILES} files, got {len(files)}")
    if CONFIG_NAME not in names:
        raise SubmissionError("a submission needs config.json")
    if not any(n.endswith(".safetensors") for n in names):
        raise SubmissionError("a submission needs at least one .safetensors file")
    return sorted(files, key=lambda f: f.name)


def model_hash(files: list[ModelFile]) -> str:
    """Hex tagged hash of the sorted file list."""
    listing = [f.model_dump() for f in check_file_list(files)]
    return tagged_hash(COMPETE_MODEL, canonical_bytes(listing)).hex()


def commitment(model_sha: str, hotkey: str) -> str:
    """Hex tagged hash binding ``model_sha`` to the committing hotkey."""
    if not re.fullmatch(r"[0-9a-f]{64}", model_sha):
        raise SubmissionError("model hash must be 64 lower-case hex characters")
    return tagged_hash(COMPETE_COMMITMENT, bytes.fromhex(model_sha) + hotkey.encode()).hex()


def list_directory(directory: Path) -> list[ModelFile]:
    """The file list of a local model directory (refusing anything but the allowed files)."""
    if not directory.is_dir():
        raise SubmissionError(f"{directory} is not a directory")
    files: list[ModelFile] = []
    for path in sorted(directory.iterdir()):
        if path.is_symlink() or not path.is_file() or not FILE_NAME.match(path.name):
            raise SubmissionError(
                f"{path.name}: a submission holds only config.json and *.safetensors files"
            )
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        files.append(ModelFile(name=path.name, sha256=digest.hexdigest(), size=path.stat().st_size))
    return check_file_list(files)
