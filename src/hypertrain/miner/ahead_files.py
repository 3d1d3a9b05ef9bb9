"""Work an island trained ahead of its round's open (overlapped rounds), on disk.

With ``round.overlap`` an island trains round ``r + 1`` before the service opens it, on
the samples and start state it predicts from round ``r``'s records
(:mod:`hypertrain.miner.ahead`). That work goes to ``ahead/`` in round ``r + 1``'s
directory with the prediction it was made for (``prediction.json``: the hash of the
sample ids, the layout and the start state's hash). When round ``r + 1`` opens,
:func:`adopt_ahead` moves the checkpoints into the round's directory only if the opened
round asks for exactly that work; otherwise (a roster changed, another key) they are
thrown away and the round is trained as usual. Adopting never changes a byte: the
checkpoints are what training from that start on those samples gives.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from hypertrain.miner.config import MinerConfig
from hypertrain.miner.report import Reporter
from hypertrain.protocol.manifest import LayoutSpec
from hypertrain.trainer.state import TrainState

log = logging.getLogger(__name__)
AHEAD_DIR = "ahead"
PREDICTION_FILE = "prediction.json"


@dataclass(frozen=True, slots=True)
class Prediction:
    """What a round's training depends on, besides the run's manifest."""

    ids_sha256: str
    layout: str  # canonical JSON of the island's layout
    start: str  # the start state's hash (hex)

    @classmethod
    def of(cls, ids: Sequence[int], layout: LayoutSpec, start: TrainState) -> Prediction:
        ids_doc = json.dumps(list(ids), separators=(",", ":")).encode()
        return cls(
            hashlib.sha256(ids_doc).hexdigest(),
            layout.model_dump_json(),
            start.state_hash().hex(),
        )


def ahead_dir(config: MinerConfig, index: int) -> Path:
    return config.round_dir(index) / AHEAD_DIR


def begin_ahead(config: MinerConfig, index: int, prediction: Prediction) -> Path:
    """The directory to train round ``index`` ahead into, holding ``prediction`` (work of
    another prediction there is thrown away; work of this one is resumed)."""
    workdir = ahead_dir(config, index)
    path = workdir / PREDICTION_FILE
    if workdir.exists() and _read(path) != prediction:
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        tmp = path.with_suffix(".part")
        tmp.write_text(json.dumps(asdict(prediction)))
        tmp.replace(path)
    return workdir


def _read(path: Path) -> Prediction | None:
    try:
        return Prediction(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def adopt_ahead(config: MinerConfig, index: int, actual: Prediction, reporter: Reporter) -> bool:
    """Move round ``index``'s ahead work into its directory when it was trained for
    ``actual`` (True); remove it otherwise. The round's directory keeps its start model;
    checkpoints it held before are replaced by the adopted ones."""
    workdir = ahead_dir(config, index)
    if not workdir.exists():
        return False
    predicted = _read(workdir / PREDICTION_FILE)
    if predicted != actual:
        reporter.event("ahead_discarded", round=index, reason=_why(predicted, actual))
        shutil.rmtree(workdir)
        return False
    target = config.round_dir(index)
    for stale in [*target.glob("ckpt_*.bin"), target / "losses.json"]:
        stale.unlink(missing_ok=True)  # work of another start must not mix with this one
    for path in sorted(workdir.iterdir()):
        if path.name != PREDICTION_FILE:
            path.replace(target / path.name)
    shutil.rmtree(workdir)
    return True


def _why(predicted: Prediction | None, actual: Prediction) -> str:
    if predicted is None:
        return "no readable prediction"
    differ = [k for k, v in asdict(actual).items() if asdict(predicted)[k] != v]
    return "the opened round asks for other " + ", ".join(differ)
