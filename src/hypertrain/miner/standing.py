"""What a miner is told about its own standing: admission terms and money, in words.

``join`` ends with :func:`admission_line` (the first round, probation, layout and
sample budget the island was admitted with); ``status`` prints :func:`money_line`
(escrow, held, vested, paid and burned from the public roster) and
:func:`weight_line` (this hotkey's weight in the newest epoch the service answered).
Every figure comes from the service's public routes; these functions only word them.
"""

from __future__ import annotations

from hypertrain.api.models import RosterEntry, WeightsPublic
from hypertrain.protocol.manifest import LayoutSpec, RunManifest


def layout_words(layout: LayoutSpec) -> str:
    """``2 ranks × 4 micro-batches × 8 samples`` (the samples of one step)."""
    return (
        f"{layout.dp_ranks} rank(s) × {layout.micro_batches} micro-batch(es)"
        f" × {layout.micro_batch_size} samples = {layout.samples_per_step} samples per step"
    )


def admission_line(
    manifest: RunManifest, layout: LayoutSpec, entry: RosterEntry | None, hotkey: str
) -> str:
    """The terms of an admitted island, or why there are none yet."""
    if entry is None:
        return f"{hotkey} is not on the roster of {manifest.run_id}: not admitted\n"
    budget = manifest.round.island_samples(layout)
    probation = (
        f"on probation until round {entry.probation_until_round} (audited every round;"
        " earnings stay held in escrow until then, and a fault burns them)"
        if entry.probation_until_round > entry.first_round
        else "no probation"
    )
    return (
        f"admitted to {manifest.run_id} as {hotkey}\n"
        f"  first round   {entry.first_round}\n"
        f"  probation     {probation}\n"
        f"  layout        {layout_words(layout)}\n"
        f"  budget        {budget} samples per round ({manifest.round.inner_steps} steps)\n"
        "  next: hypertrain-miner run --follow (same flags), and keep"
        " hypertrain-miner watch --follow running\n"
    )


def money_line(entry: RosterEntry | None) -> str:
    """Escrow, held, vested, paid and burned, in the ledger's integer base units."""
    if entry is None:
        return "money: none (not on the roster)"
    return (
        f"money (base units): escrow {entry.escrow} (held {entry.held}), vested {entry.vested},"
        f" paid {entry.paid}, burned {entry.burned}"
    )


def weight_line(weights: WeightsPublic | None, hotkey: str) -> str:
    """This hotkey's weight in the newest answered epoch, with the epoch's total."""
    if weights is None:
        return "weight: no epoch has been answered yet"
    mine = weights.weights.get(hotkey, 0.0)
    share = mine / weights.full_share_mass if weights.full_share_mass else 0.0
    return (
        f"weight in epoch {weights.epoch}: {mine:g} of {weights.full_share_mass:g}"
        f" ({share:.2%} of the full share)"
    )
