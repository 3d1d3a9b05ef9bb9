"""The long run's result and plot, from its saved records (``bench_longrun.py``).

Figures: held-out loss per round of the network (the aggregator's figure on its signed
tape) and of the data-parallel baseline on the same tokens (the same function and
held-out samples); the gap per round; the 5-round moving average's longest streak of
rises (the quality issue's target: never more than 5 rounds in a row); bytes as
docs/traffic.md counts them, read from the network's report (all-in with the warm start
first, then the rounds alone); utilisation; wall times; the commit.
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path
from typing import Any

from hypertrain.api.models import RoundDetail
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.recipe import CARRIED_DTYPE, WARM_START_PERCENT, warm_start_steps

WINDOW = 5  # rounds in the moving average
BLOCK = 50  # rounds per block of the gap's trajectory (one round's gap is noisy: ±1-2 points)
CURVES = ("network_loss", "baseline_loss", "tokens")  # per-round series, kept out of the table
SEED = 7  # the long run's run seed (another seed's files: -seedN)
# The H files name no H for: the recipe's H when the first long runs were named. Files of
# the recipe's H = 20 say -h20, as the runs that measured it before it became the recipe's.
NAMES_H = 15


ROOT = Path(__file__).resolve().parent.parent


def commit() -> str:
    """The commit the run measured (``+dirty``: with uncommitted changes under src/)."""
    git = ["git", "-C", str(ROOT)]
    out = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "src"], capture_output=True, text=True, check=False
    )
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def moving_average(values: list[float], window: int = WINDOW) -> list[float]:
    return [sum(values[i - window + 1 : i + 1]) / window for i in range(window - 1, len(values))]


def longest_rise(values: list[float]) -> int:
    """The longest run of consecutive increases."""
    best = run = 0
    for a, b in itertools.pairwise(values):
        run = run + 1 if b > a else 0
        best = max(best, run)
    return best


def gap_blocks(net: list[float], dp: list[float], block: int = BLOCK) -> list[dict[str, Any]]:
    """The gap over consecutive blocks of rounds: mean network loss over mean data-parallel
    loss, minus one, in percent (whether the gap closes or opens as the run goes on)."""
    out = []
    for first in range(0, min(len(net), len(dp)), block):
        a, b = net[first : first + block], dp[first : first + block]
        gap = 100 * (sum(a) / sum(b) - 1)
        out.append({"rounds": f"{first}-{first + len(a) - 1}", "gap_pct": round(gap, 2)})
    return out


def network_losses(details: list[RoundDetail]) -> list[float]:
    """The network's held-out loss after each round. A round that merged nothing (no
    island committed in time) left the model as it was, so its loss is the round before's;
    any other final round without a loss is an error."""
    out: list[float] = []
    for d in details:
        if d.eval_loss is not None:
            out.append(float(d.eval_loss))
        elif d.new_model_sha256 is None and out:
            out.append(out[-1])
        else:
            raise SystemExit(f"final round {d.round} has no held-out loss on its tape")
    return out


def build_result(
    manifest: RunManifest,
    details: list[RoundDetail],
    report: dict[str, Any] | None,
    losses: dict[str, list[float]],
    wall: dict[str, float],
    samples: list[int],
    measured: str,
) -> dict[str, Any]:
    net = network_losses(details)
    dp = losses["rounds"][: len(net)]
    n = len(dp)
    seq = manifest.data.seq_len
    warm = manifest.warm_start
    warm_tokens = 0 if warm is None else warm.steps * warm.samples_per_step * seq
    tokens = []
    total = warm_tokens
    for count in samples[:n]:
        total += count * seq
        tokens.append(total)
    tail = min(WINDOW, n)
    net_tail = sum(net[n - tail : n]) / tail if n else float("nan")
    dp_tail = sum(dp[n - tail : n]) / tail if n else float("nan")
    result: dict[str, Any] = {
        "commit": measured,
        "rounds": len(net),
        "rounds_with_baseline": n,
        "recipe": {
            "preset": manifest.model.preset,
            "inner_steps": manifest.round.inner_steps,
            "checkpoint_interval": manifest.round.checkpoint_interval,
            "state_policy": manifest.inner.state_policy,
            "optimizer": manifest.inner.name,
            "carried_dtype": manifest.inner.carried_dtype,
            "outer": manifest.outer.model_dump(mode="json"),
            "codec": manifest.compression.codec,
            "entropy_coded": manifest.compression.entropy,
            "warm_start_steps": 0 if warm is None else warm.steps,
            "seq_len": seq,
            "overlap": manifest.round.overlap,
        },
        "network_loss": net,
        "baseline_loss": dp,
        "baseline_warm_start_loss": (losses["warm_start"] or [None])[0],
        "tokens": tokens,
        "final_network_loss": net[n - 1] if n else None,
        "final_baseline_loss": dp[n - 1] if n else None,
        "final_gap_pct": 100 * (net[n - 1] / dp[n - 1] - 1) if n else None,
        "last5_gap_pct": 100 * (net_tail / dp_tail - 1) if n else None,
        "gap_by_block": gap_blocks(net[:n], dp),
        "rounds_without_merge": [d.round for d in details if d.new_model_sha256 is None],
        "network_longest_ma5_rise": longest_rise(moving_average(net)),
        "baseline_longest_ma5_rise": longest_rise(moving_average(dp)),
        "wall": _walls(wall),
    }
    if report is not None:
        result["traffic"] = _traffic(report)
        result["traffic"]["caught_island_audits"] = caught_audit_bytes(manifest, details, report)
        result["utilisation"] = {
            k: v for k, v in report.get("utilisation", {}).items() if k != "per_round"
        }
        result["honeypot"] = report.get("honeypot")
        result["ledger_verified"] = report.get("ledger_verified")
    result["targets"] = {
        "network_longest_ma5_rise": "<= 5 rounds",
        "last5_gap_pct": "<= +3 % (goal +1 %)",
        "final_gap_pct": "<= +3 % (goal +1 %)",
    }
    tag = result_tag(manifest)
    overlapped = (
        " Overlapped rounds (round.overlap): islands train each round while the one before"
        " is audited and merged (docs/protocol.md); its cost is this gap against the"
        " sequential run's (longrun.json)."
        if manifest.round.overlap
        else ""
    )
    warm = warm_percent(manifest)
    if warm is not None:
        overlapped += (
            f" A warm start of {warm} % of all steps instead of the"
            f" recipe's {WARM_START_PERCENT} % (bench_longrun.py --warm-start-percent)."
        )
    result["notes"] = (
        "The product's network (hypertrain.devnet: beacon, service, relay, auditor, witness,"
        " aggregator, honest islands and the honeypot, each its own process) against"
        " data-parallel training on exactly the tokens each round merged (devnet.baseline),"
        " from the same start (the seed's model, or the same warm start); held-out loss is"
        f" the aggregator's function on the same held-out samples for both.{overlapped}"
        " Per-round series:"
        f" benchmarks/results/longrun/curves{tag}.json."
        f"\n\n![Held-out loss against tokens, the network and data-parallel](longrun{tag}.png)"
    )
    return result


def warm_percent(manifest: RunManifest) -> int | None:
    """The warm start's share of all steps, in %, when it is not the recipe's (else None)."""
    warm = manifest.warm_start.steps if manifest.warm_start is not None else 0
    round_steps = manifest.inner.total_steps - warm  # the schedule plans warm start + rounds
    if warm == warm_start_steps(round_steps, WARM_START_PERCENT):
        return None
    return round(100 * warm / (warm + round_steps))


def result_tag(manifest: RunManifest) -> str:
    """The suffix of a variant's files: ``-overlap`` for overlapped rounds, ``-muon`` for
    Muon inner steps, ``-f32slots`` for optimizer slots carried in float32 (not the recipe's
    width), ``-warmP`` for a warm start other than the recipe's share (P % of all steps),
    ``-hH`` for an H other than :data:`NAMES_H`, ``-seedN`` for another run seed; "" for
    AdamW inner steps, H = 15 and the recipe's other settings (the files' names predate
    Muon and H = 20 in the recipe; the result's ``recipe`` section names the optimizer, H
    and whether codes were entropy coded)."""
    tag = "-overlap" if manifest.round.overlap else ""
    if manifest.inner.name != "adamw":
        tag += f"-{manifest.inner.name}"
    carried = manifest.inner.carried_dtype
    if manifest.inner.state_policy == "carry" and carried != CARRIED_DTYPE:
        tag += f"-{carried.replace('float', 'f')}slots"
    if manifest.round.inner_steps != NAMES_H:
        tag += f"-h{manifest.round.inner_steps}"
    warm = warm_percent(manifest)
    if warm is not None:
        tag += f"-warm{warm}"
    if manifest.seed != SEED:
        tag += f"-seed{manifest.seed}"
    return tag


def _walls(wall: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    start = wall.get("network_started")
    if start is not None and "network_finished" in wall:
        out["network_s"] = round(wall["network_finished"] - start, 1)
    if start is not None and "network_stopped" in wall:  # stopped before its last round
        out["network_s_until_stopped"] = round(wall["network_stopped"] - start, 1)
    if start is not None and "baseline_finished" in wall:
        out["to_baseline_done_s"] = round(wall["baseline_finished"] - start, 1)
    if "network_running_s" in wall:  # the network's time up, summed over its parts
        out["network_running_s"] = round(wall["network_running_s"], 1)
    return out


def recount_note(report: dict[str, Any], tree: str) -> dict[str, Any]:
    """A recounted report's traffic (``bench_longrun.recounted_report``) with what it is."""
    return {
        **_traffic(report),
        "counted_by": tree,
        "note": "the run's own rounds, audits and verdicts, counted by the rules of the tree"
        " named in counted_by (dashboard.traffic.round_traffic): what the same rounds move"
        " there; the run's islands moved what traffic says",
    }


def _traffic(report: dict[str, Any]) -> dict[str, Any]:
    """All-in first (every round plus the warm start's data-parallel steps), then rounds."""
    from hypertrain.devnet.report import all_in_of

    rounds = report["traffic"]["all"]
    card = all_in_of(report["traffic"], report.get("warm_start"))
    return {
        "all_in_ratio": card["ratio"],
        "all_in_words": card["words"],
        "rounds_ratio": rounds["ratio"],
        "rounds_bytes": rounds["honest_bytes"],
        "rounds_data_parallel_bytes": rounds["data_parallel_bytes"],
        "warm_start_data_parallel_bytes": card["warm_start_bytes"],
        "parts": rounds["parts"],
    }


def caught_audit_bytes(
    manifest: RunManifest, details: list[RoundDetail], report: dict[str, Any]
) -> dict[str, Any] | None:
    """The checkpoint uploads of the honeypot's audits after its first proven fault (a
    caught island is replayed every round: ``challenge.rounds.phases.select_round``),
    counted as the service counts every audit (``dashboard.traffic``: under ``carry`` its
    carried state of the round before unless the round's open record has it start fresh or
    lists it as stored, plus one state per selected segment but segment 0),
    and the all-in ratio the run would show without them (what an honest network moves)."""
    from hypertrain.challenge.dashboard.traffic import carried_bytes, state_bytes
    from hypertrain.protocol.messages import AuditAssignment, RoundOpen

    honeypot = report.get("honeypot") or {}
    hotkey, first = honeypot.get("hotkey"), honeypot.get("first_fault_round")
    if hotkey is None or first is None:
        return None
    params = int(report["model"]["parameters"])
    per_state, per_carried = state_bytes(manifest, params), carried_bytes(manifest, params)
    carried = manifest.inner.state_policy == "carry"
    states = carries = 0
    for i, detail in enumerate(details):
        if i <= first:
            continue
        for envelope in detail.assignments:
            audit = AuditAssignment.model_validate(envelope.body)
            if audit.hotkey != hotkey:
                continue
            states += sum(1 for k in audit.segments if k > 0)
            record = RoundOpen.model_validate(detail.open.body)
            public = hotkey in record.fresh_start or hotkey in record.carry_stored
            carries += int(carried and not public and hotkey in details[i - 1].commit_order)
    traffic = _traffic(report)
    warm = traffic["warm_start_data_parallel_bytes"]
    moved = states * per_state + carries * per_carried
    ours = traffic["rounds_bytes"] - moved + warm
    theirs = traffic["rounds_data_parallel_bytes"] + warm
    return {
        "after_round": first,
        "states_uploaded": states,
        "carried_states_uploaded": carries,
        "bytes": moved,
        "share_of_rounds_bytes": moved / traffic["rounds_bytes"],
        "all_in_ratio_without": theirs / ours,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = result["rounds_with_baseline"]
    tokens = [t / 1e6 for t in result["tokens"][:n]]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    ax.plot(tokens, result["network_loss"][:n], label="network (islands, audits, merge)")
    ax.plot(tokens, result["baseline_loss"][:n], label="data-parallel on the same tokens")
    ax.set_xlabel("tokens trained (millions, warm start included)")
    ax.set_ylabel("held-out loss")
    recipe = result["recipe"]
    ax.set_title(
        f"Long run: {result['rounds']} rounds, {recipe['preset']}, H = {recipe['inner_steps']},"
        f" {recipe['state_policy']}{', overlapped' if recipe.get('overlap') else ''}"
        f" (gap {result['last5_gap_pct']:+.2f} %, last 5 rounds)"
    )
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
