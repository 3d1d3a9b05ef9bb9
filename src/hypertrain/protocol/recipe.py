"""The training recipe ``hypertrain run init`` and the devnet write into a new manifest.

The manifest model's own defaults (:class:`hypertrain.protocol.manifest.OuterOptimSpec`:
Nesterov, lr 0.7, momentum 0.9) are kept so that existing manifests keep their meaning and
hash; new runs get the outer step the parity grid measured best at equal bytes. In that
grid (docs/parity.md, "The product default"), plain averaging (outer lr 1.0, momentum 0)
beat Nesterov 0.7 / 0.9 at M = 8 and H = 25 on every one of five paired seeds: 3.0 % lower
held-out loss, 90 % interval [2.3 %, 3.8 %], at the same traffic.

The inner optimizer's state carries over between rounds (``carry``): each island starts a
round from the merged parameters with its own optimizer moments and step counter from its
previous round, as DiLoCo's workers do. ``reset`` (zero moments every round while the
step counter runs on, so bias correction is off and every round opens with sign-like steps
of a two-sample gradient) won 100-step grids but makes a long run's held-out loss rise
round after round (docs/parity.md, "The long run"). The manifest model's own default stays
``reset`` so that existing manifests keep their meaning and hash.
"""

from __future__ import annotations

from typing import Final

# The outer step of a new run: plain averaging of the accepted pseudo-gradients, sent to
# islands that trained the last round as the 4-bit-encoded merged step, not the model.
OUTER_STEP: Final = {"lr": 1.0, "momentum": 0.0, "broadcast": "int4"}
# How a new run's islands encode their pseudo-gradients: blockwise 4-bit codes without
# error feedback, half the bytes of int8. At the long run's shape in process
# (benchmarks/parity_horizon.py, 200 rounds, three seeds) 4-bit updates and broadcast
# ended 0.27 points of held-out loss gap behind int8 (docs/parity.md, "The recipe at the
# long run's horizon"); 2-bit with error feedback 0.5 behind. The codes are entropy coded
# (trainer.entropy, lossless, updates and broadcast): a real 4-bit update's codes take
# about 3.3 bits each, so an update or a broadcast is about 0.83 of its plain size.
COMPRESSION: Final = {"bits": 4, "entropy": True}
# H of a new run: inner steps per round (docs/parity.md, "The long run"). Through the
# product's long run with Muon and entropy-coded codes (150 rounds, the same 3,000 steps as
# 200 of H = 15), H = 20 ended +2.72 % and +2.97 % to Muon data-parallel on two seeds,
# inside the +3 % target (the moving average rose at most 5 rounds in a row, the limit),
# and moved 123x and 117x less than data-parallel all-in (a round's bytes do not grow with
# H). H = 15 ended +2.58 % and +0.47 % on the same seeds at 75x and 76x (before entropy
# coding): H = 20 costs about 1.3 points of gap on average for the 100x. AdamW's H = 30
# ended +2.76 % and +6.95 %.
INNER_STEPS: Final = 20
# The islands' inner optimizer in a new run: Muon (orthogonalised momentum on the weight
# matrices, AdamW on embeddings, head and norms). Through the product's long run (200
# rounds, H = 15, each against data-parallel trained with Muon on the same tokens) it ended
# +2.58 % and +0.47 % to data-parallel on two seeds, inside the +3 % target, at held-out
# losses 3.10 and 3.10 where the AdamW recipe ended at 3.58 (AdamW data-parallel: 3.52);
# its carried state holds one momentum per matrix, so an audit fetches about half the
# bytes. One seed's five-round moving average rose 7 rounds in a row (the target allows 5;
# data-parallel Muon rose 6 on the other seed). docs/parity.md, "Muon inner steps".
INNER_OPTIMIZER: Final = "muon"
# How a new run's rounds start their inner optimizer state (module docstring).
STATE_POLICY: Final = "carry"
# The width a new run's islands carry their optimizer slots in between rounds: rounded to
# bfloat16 at each round's end, so an audit fetches half the carried bytes. In process at
# the long run's shape (benchmarks/parity_horizon.py, 4-bit codes, three seeds) it ended
# +0.70 % to data-parallel against +0.79 % with float32 slots: no measurable cost
# (docs/parity.md, "The recipe at the long run's horizon").
CARRIED_DTYPE: Final = "bfloat16"
# The three, as the manifest's ``inner`` section takes them.
INNER_STATE: Final = {
    "name": INNER_OPTIMIZER,
    "state_policy": STATE_POLICY,
    "carried_dtype": CARRIED_DTYPE,
}
# J of a new run: 0 means the whole round (J = H). Each checkpoint an audit replays from
# costs an audited island one full training state's upload, and an audit draws every
# segment of a short round anyway, so one segment moves the fewest bytes for the same
# catch (docs/traffic.md, "Checkpoints").
CHECKPOINT_INTERVAL: Final = 0
# The share of all steps a new run trains data-parallel before round 0 (the manifest's
# ``warm_start``; 0: none, round 0 starts from the seed's model, which every island
# computes). Through the product's long run (docs/parity.md, "The warm start's share")
# no warm start ended closer to data-parallel than 1 % on both seeds measured, and 1 %
# as close as 10 %, while the warm start's all-reduce is data-parallel traffic that caps
# the whole run's all-in ratio at 100x for 1 % and 10x for 10 %.
WARM_START_PERCENT: Final = 0


def warm_start_steps(round_steps: int, percent: int) -> int:
    """Warm-start steps that make ``percent`` % of all steps (warm start plus the rounds'
    ``round_steps``); 0 for 0 %."""
    if not 0 <= percent < 100:
        raise ValueError(f"the warm-start share must be in [0, 100) %, got {percent}")
    if percent == 0:
        return 0
    return max(1, round(round_steps * percent / (100 - percent)))
