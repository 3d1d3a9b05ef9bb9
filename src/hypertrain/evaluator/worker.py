"""The child process that scores one model: ``python -m hypertrain.evaluator.worker``.

Arguments: the spec (JSON file), the model directory, the pages (a ``.npy`` int64
array ``[pages, seq_len]``) and the torch thread count. It prints the hex of the
page losses on stdout. A model the checks refuse exits with
:data:`~hypertrain.evaluator.sandbox.REFUSED_EXIT` and the reason as the last line
of stderr; anything else that goes wrong is an ordinary non-zero exit, which the
parent turns into a refusal too (see :mod:`hypertrain.evaluator.sandbox`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from hypertrain.competition.messages import encode_losses
from hypertrain.competition.spec import CompetitionSpec
from hypertrain.competition.submission import SubmissionError
from hypertrain.evaluator.sandbox import REFUSED_EXIT
from hypertrain.evaluator.scorer import load_model, page_losses, prepare


def main(argv: list[str]) -> int:
    """Score one model; see the module docstring for the arguments and exit codes."""
    spec_file, model_dir, pages_file, threads = argv
    spec = CompetitionSpec.model_validate_json(Path(spec_file).read_text(encoding="utf-8"))
    prepare(spec, int(threads))
    pages = torch.from_numpy(np.load(pages_file, allow_pickle=False))
    try:
        model, _ = load_model(Path(model_dir), spec)
    except SubmissionError as exc:
        sys.stderr.write(str(exc).replace("\n", " ") + "\n")
        return REFUSED_EXIT
    sys.stdout.write(encode_losses(page_losses(model, pages, spec.data.batch_pages)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
