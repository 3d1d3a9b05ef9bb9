"""A quality-score filter over corpus rows, for FineWeb-Edu's published layout.

FineWeb-Edu ships Parquet files with the columns ``text``, ``id``, ``dump``, ``url``,
``file_path``, ``language``, ``language_score``, ``token_count``, ``score`` (the
educational classifier's float score, about 0-5) and ``int_score`` (its rounded
integer). ``hypertrain data prepare --min-int-score 3`` keeps the rows whose
``int_score`` is at least 3 (``--min-score 3.5`` filters on ``score``); a JSON-lines
corpus with the same fields filters the same way. Every dropped row is counted in the
descriptor (``corpus.filtered_documents``) next to the filter that dropped it
(``corpus.score_filter``), so the filter is part of what the dataset hash pins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from hypertrain.data.errors import CorpusError

ScoreColumn = Literal["score", "int_score"]
FINEWEB_EDU_COLUMNS = (
    "text", "id", "dump", "url", "file_path", "language", "language_score", "token_count",
    "score", "int_score",
)  # fmt: skip


class ScoreError(CorpusError):
    """A score filter met a row without a usable score, or a file that has none."""


@dataclass(frozen=True, slots=True)
class ScoreFilter:
    """Keep a row when its ``column`` is at least ``minimum``."""

    column: ScoreColumn
    minimum: float

    def __post_init__(self) -> None:
        if self.column not in ("score", "int_score"):
            raise ScoreError(f"score column must be 'score' or 'int_score', got {self.column!r}")
        if isinstance(self.minimum, bool) or not math.isfinite(self.minimum):
            raise ScoreError(f"score minimum must be a finite number, got {self.minimum!r}")

    def describe(self) -> str:
        """What the descriptor records, e.g. ``int_score >= 3``."""
        return f"{self.column} >= {self.minimum:g}"

    def keeps(self, value: object, where: str) -> bool:
        """Whether a row with score ``value`` is kept; refuses a missing or non-numeric one."""
        if value is None:
            raise ScoreError(f"{where}: {self.column} is missing (null)")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScoreError(f"{where}: {self.column} must be a number, got {type(value).__name__}")
        if not math.isfinite(value):
            raise ScoreError(f"{where}: {self.column} is not finite")
        return value >= self.minimum
