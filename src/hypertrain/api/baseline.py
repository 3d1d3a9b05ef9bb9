"""A run's data-parallel baseline curve, as the operator publishes it and the service keeps it.

The operator trains one data-parallel model on exactly the tokens each round merged
(``hypertrain.devnet.baseline``) and publishes its held-out loss per round with
``PUT /admin/v1/runs/{run_id}/baseline``; the dashboard draws it beside the network's
curve. The curve is informational only: it is an operator's claim that nobody signs or
audits, and it never feeds a hash, a verdict, a bond or a reward.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

# A curve longer than this is refused by its shape alone (a run's own schedule bounds it
# further: no more points than the rounds it plans).
MAX_BASELINE_ROUNDS: Final = 100_000
DEFAULT_LABEL: Final = "data-parallel on the same tokens"
# A held-out loss: a finite, non-negative cross-entropy (NaN and infinities are refused).
# Strict: a JSON number only (a string or a boolean is refused, not coerced).
HeldoutLoss = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]


class BaselineIn(BaseModel):
    """``PUT /admin/v1/runs/{run_id}/baseline``: the held-out loss after each round
    (``heldout_loss[r]``: after round ``r``) and what the baseline is, in a few words."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(
        default=DEFAULT_LABEL, min_length=1, max_length=80, pattern=r"^[^\x00-\x1f\x7f]+$"
    )
    heldout_loss: list[HeldoutLoss] = Field(min_length=1, max_length=MAX_BASELINE_ROUNDS)


class BaselinePublic(BaseModel):
    """A run's published baseline curve, with the beacon round it was last replaced at."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: str
    label: str
    heldout_loss: list[float]
    updated_beacon_round: int
