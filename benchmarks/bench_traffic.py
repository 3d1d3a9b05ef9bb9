"""Honest traffic per island-round against data-parallel training, from the byte formats.

Every figure is an exact byte count of the protocol's own encodings, not a timing, so it
does not depend on the machine: a real update of the model's shapes
(``trainer.update.encode_update``), the real start-model broadcast
(``trainer.broadcast.broadcast_step``), ``trainer.checkpoint.checkpoint_size`` and the
float32 model blob. Both sides are counted the way ``protocol.traffic`` counts them, at
each training node's link, sent and received: per island and round the commit, the
update, the broadcast it receives, and the audited checkpoints it uploads (audit rate x
the expected number of selected segments other than segment 0, whose start state
auditors derive, x one training state); the full model a joining island downloads is
reported once per join. Data-parallel is a bf16 ring all-reduce every step on as many
devices as islands, sent and received (``protocol.traffic.data_parallel_bytes``).

No configuration here has a measured loss gap (the parity grid ran a 133k-parameter
proxy up to H = 100, not these models; ``loss_gap_validated`` reads what it measured from
its combined result), so every ratio is labelled a projection.

Run: ``python benchmarks/bench_traffic.py``.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from common import write_result
from hypertrain.protocol.manifest import (
    CompressionSpec,
    InnerOptimSpec,
    ModelSpec,
    SparseSpec,
)
from hypertrain.protocol.recipe import (
    CARRIED_DTYPE,
    COMPRESSION,
    INNER_OPTIMIZER,
    INNER_STEPS,
    OUTER_STEP,
    STATE_POLICY,
    WARM_START_PERCENT,
)
from hypertrain.protocol.traffic import (
    RoundBytes,
    data_parallel_bytes,
    factor_words,
    ratio_words,
    uploads_per_audit,
)
from hypertrain.trainer.broadcast import broadcast_step
from hypertrain.trainer.carried import carried_size
from hypertrain.trainer.checkpoint import checkpoint_size
from hypertrain.trainer.model import init_params, param_shapes
from hypertrain.trainer.presets import PRESETS, param_count, with_vocab
from hypertrain.trainer.state import StateConfig
from hypertrain.trainer.update import encode_update

BROADCAST_BITS = int(str(OUTER_STEP["broadcast"])[3:])
COMMIT_BYTES = 1100  # a signed commit envelope (canonical JSON), as the service stores it
EF = CompressionSpec(error_feedback=True)  # int8, block 256, error feedback on
SPARSE = CompressionSpec(error_feedback=True, sparse=SparseSpec())  # 64 of 4096, 2 bits
# The parity grid's largest validated H (diloco-M8-H100, a 133k-parameter proxy, int8):
# its gap to data-parallel, 90% interval, from benchmarks/results/parity/parity-core.json.
PARITY = Path(__file__).resolve().parent / "results" / "parity" / "parity-combined.json"


def parity_gap() -> str:
    """What the parity grid validated (benchmarks/results/parity/parity-combined.json):
    its largest H at M = 8 and the product recipe's gap, in words."""
    doc = json.loads(PARITY.read_text())
    cells = [c for c in doc["cells"].values() if c["kind"] == "diloco" and c["islands"] == 8]
    longest = max((c for c in cells if c["size"] == "s"), key=lambda c: c["inner_steps"])
    product = doc["summary"]["product_recipe"]
    lo, hi = product["gap_pct_ci90"]
    n = longest["seeds_paired"]
    return (
        f"parity grid, 133k-parameter proxy, M = 8: largest H measured H ="
        f" {longest['inner_steps']}, {longest['gap_pct_mean']:.1f}% worse than data-parallel"
        f" ({'one seed' if n == 1 else f'{n} seeds'}); the product recipe ({product['recipe']})"
        f" {product['gap_pct_mean']:.2f}% worse (90% CI {lo:.2f} to {hi:.2f}%)"
    )


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    model: ModelSpec
    islands: int  # M
    inner_steps: int  # H
    checkpoint_interval: int  # J
    audit_rate: float
    random_segments: int  # k: drawn from 0..S-2; the final segment S-1 is always added
    compression: CompressionSpec
    broadcast: bool = True
    carried: bool = False  # the ``carry`` policy: an audit also uploads the previous state
    broadcast_bits: int = 8
    carried_dtype: str = "float32"  # the width of the carried optimizer slots
    optimizer: str = "adamw"  # the inner optimizer (its slots make the states' sizes)

    @property
    def segments(self) -> int:
        return self.inner_steps // self.checkpoint_interval

    def inner(self) -> InnerOptimSpec:
        if not self.carried:
            return InnerOptimSpec.model_validate({"name": self.optimizer})
        return InnerOptimSpec.model_validate(
            {"name": self.optimizer, "state_policy": "carry", "carried_dtype": self.carried_dtype}
        )

    def uploads_per_audit(self) -> float:
        """Expected training states' worth uploaded by one audit (``protocol.traffic``'s
        count: under ``carry`` the previous round's carried state, a state without its
        parameters, only when the rate did not match the round before, whose auditor
        then stored it)."""
        state = StateConfig(self.model, self.inner(), self.compression.error_feedback)
        share = carried_size(state) / checkpoint_size(state)
        return uploads_per_audit(
            self.segments, self.random_segments, self.carried, self.audit_rate, share
        )


_SIZES: dict[tuple[str, str], tuple[int, int]] = {}


def encoded_sizes(
    model: ModelSpec, compression: CompressionSpec, broadcast_bits: int = 8
) -> tuple[int, int]:
    """(update bytes, broadcast bytes) of one outer step of ``model`` (computed once)."""
    key = (model.model_dump_json(), compression.model_dump_json(), str(broadcast_bits))
    if key not in _SIZES:
        g = torch.Generator().manual_seed(0)
        start = init_params(model, 0)
        end = {n: start[n] - 1e-3 * torch.randn(s, generator=g) for n, s in param_shapes(model)}
        update = encode_update({n: start[n] - end[n] for n in start}, compression)
        coded = compression.entropy and broadcast_bits != 8  # int8 broadcasts are never coded
        broadcast = broadcast_step(
            start, end, model, compression.block_size, broadcast_bits, coded
        )[0]
        _SIZES[key] = (len(update), len(broadcast))
    return _SIZES[key]


def steady_round(s: Scenario) -> tuple[RoundBytes, int]:
    """(one island's steady-state bytes in a round, one full-state checkpoint's bytes)."""
    update, broadcast = encoded_sizes(s.model, s.compression, s.broadcast_bits)
    state = StateConfig(s.model, s.inner(), s.compression.error_feedback)
    ckpt = checkpoint_size(state)
    join = 0 if s.broadcast else 4 * param_count(s.model)  # no broadcast: the model, always
    ours = RoundBytes(
        commits=COMMIT_BYTES,
        updates=update,
        broadcasts=broadcast if s.broadcast else 0,
        checkpoints=round(s.audit_rate * s.uploads_per_audit() * ckpt),
        joins=join,
    )
    return ours, ckpt


def per_island_round(s: Scenario) -> dict[str, Any]:
    params = param_count(s.model)
    ours, ckpt = steady_round(s)
    ddp = data_parallel_bytes(params, s.islands, s.inner_steps) // s.islands
    return {
        "params": params,
        "checkpoint_bytes": ckpt,
        **{f"{k}_bytes": v for k, v in ours.parts().items()},
        "join_bytes": 4 * params,
        "total_bytes": ours.total(),
        "data_parallel_bytes": ddp,
        "ratio": ddp / ours.total(),
        "words": ratio_words(ddp, ours.total()) + " (projection)",
    }


def scenarios() -> list[Scenario]:
    proxy = with_vocab(PRESETS["proxy"], 1024)
    big = PRESETS["50m"]
    out = [
        # the devnet (3 islands and the honeypot, H = 12, J = 4, k = 2): probation audits
        # every island, the steady state audits at the default rate
        Scenario("devnet_probation", proxy, 4, 12, 4, 1.0, 2, CompressionSpec()),
        Scenario("devnet_steady", proxy, 4, 12, 4, 0.1, 2, CompressionSpec()),
    ]
    # the recipe new runs get (protocol.recipe): entropy-coded 4-bit updates and
    # broadcast, carry with bfloat16 slots, h = H = INNER_STEPS, J = H
    four, h = CompressionSpec.model_validate(COMPRESSION), INNER_STEPS
    plain = four.model_copy(update={"entropy": False})
    recipe = {
        "carried": STATE_POLICY == "carry",
        "broadcast_bits": BROADCAST_BITS,
        "carried_dtype": CARRIED_DTYPE,
        "optimizer": INNER_OPTIMIZER,
    }
    out += [
        Scenario("devnet_recipe_probation", proxy, 4, h, h, 1.0, 2, four, **recipe),
        Scenario("devnet_recipe_steady", proxy, 4, h, h, 0.1, 2, four, **recipe),
        # the 50m model at the recipe's H, which the long run measured on the proxy
        Scenario(f"50m_h{h}_recipe", big, 8, h, h, 0.1, 2, four, **recipe),
        # the same without entropy coding: what the lossless coding saves
        Scenario(f"50m_h{h}_recipe_plain_codes", big, 8, h, h, 0.1, 2, plain, **recipe),
    ]
    # the recipe at the H before it (15) and at DiLoCo's horizon (500)
    out += [
        Scenario(f"50m_h{other}_recipe", big, 8, other, other, 0.1, 2, four, **recipe)
        for other in (15, 500)
        if other != h
    ]
    for h in (100, 500):
        out += [
            Scenario(f"50m_h{h}_int8", big, 8, h, h // 10, 0.1, 2, EF),
            Scenario(f"50m_h{h}_sparse", big, 8, h, h // 10, 0.1, 2, SPARSE),
            Scenario(f"50m_h{h}_int8_j_eq_h", big, 8, h, h, 0.1, 0, EF),
            Scenario(f"50m_h{h}_int8_model_download", big, 8, h, h // 10, 0.1, 2, EF, False),
        ]
    return out


def audit_costs() -> dict[str, Any]:
    """Bytes one audit makes the 50m island upload, per state policy and layout (H = 500)."""
    base = Scenario("audit", PRESETS["50m"], 8, 500, 50, 1.0, 2, EF)
    ckpt = checkpoint_size(StateConfig(base.model, InnerOptimSpec(), True))
    recipe = InnerOptimSpec(state_policy="carry", carried_dtype=CARRIED_DTYPE)
    carried = carried_size(StateConfig(base.model, recipe, True))  # the recipe's slot width
    one_segment = Scenario("audit", PRESETS["50m"], 8, 500, 500, 1.0, 0, EF)
    return {
        "audit_bytes_reset_j50": round(base.uploads_per_audit() * ckpt),
        "audit_bytes_reset_j_eq_h": round(one_segment.uploads_per_audit() * ckpt),
        # carry: the start state also needs the island's previous carried state (an
        # audit whose island's round before no auditor matched and stored)
        "audit_bytes_carry_j50": round(base.uploads_per_audit() * ckpt) + carried,
        "audit_bytes_carry_j_eq_h": carried,
        "checkpoint_bytes_50m_ef": ckpt,
    }


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main() -> None:
    result: dict[str, Any] = {"git_commit": git_commit(), "loss_gap_validated": parity_gap()}
    for s in scenarios():
        row = per_island_round(s)
        for key in ("total_bytes", "updates_bytes", "broadcasts_bytes", "checkpoints_bytes"):
            result[f"{s.name}_{key}"] = row[key]
        result[f"{s.name}_data_parallel_bytes"] = row["data_parallel_bytes"]
        result[f"{s.name}_ratio"] = row["ratio"]
        result[f"{s.name}_words"] = row["words"]
        if "recipe" in s.name:  # all-in: the recipe's warm start, data-parallel on both sides
            w = WARM_START_PERCENT / 100
            all_in = 1 / ((1 - w) / row["ratio"] + w)
            result[f"{s.name}_all_in_ratio"] = all_in
            result[f"{s.name}_all_in_words"] = factor_words(all_in) + " (projection)"
        print(s.name, row["words"], {k: v for k, v in row.items() if k.endswith("_bytes")})
    result |= audit_costs()
    write_result(
        "traffic",
        result,
        targets={"50m_h500_int8_ratio": ">= 1,000x less than data-parallel (projection)"},
        notes=(
            "Bytes per island per steady-state round, exact from the encodings; ratio ="
            " data-parallel bytes per device (bf16 ring all-reduce every step, sent and"
            " received, n = islands) / island bytes (commit + update + received int8"
            " broadcast + audit rate x expected uploaded checkpoints x one training state)."
            " A join downloads the float32 model once (join_bytes). *_model_download: the"
            " start model downloaded every round instead of the broadcast. *_j_eq_h: one"
            " segment per round, whose start state is public, so audits upload nothing."
            " *_recipe: the recipe new runs get (4-bit updates and broadcast, carry with"
            f" {CARRIED_DTYPE} optimizer slots, J = H: an audit uploads the previous carried"
            f" state; devnet and 50m_h{INNER_STEPS}: the recipe's H), with the all-in ratio of its"
            f" {WARM_START_PERCENT} % warm start (1 / ((1 - w) / ratio + w))."
            " Every ratio is a projection: no loss gap was measured for these models;"
            " the parity grid's largest validated H is in loss_gap_validated."
        ),
    )


if __name__ == "__main__":
    main()
