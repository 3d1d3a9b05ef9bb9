"""The long run: the real network for hundreds of rounds beside data-parallel on its tokens.

Usage::

    python benchmarks/bench_longrun.py [--rounds 150] [--state .cache/longrun] [--budgets 1,1,1]

It starts the product's own network (``hypertrain.devnet``: a local beacon, the challenge
service, a relay, the auditor, a tape witness, the aggregator, honest islands and the
honeypot, each its own process on loopback) on the proxy preset and the repository's
text for ``--rounds`` rounds of the recipe new runs get (``protocol.recipe``: no warm
start, ``carry``, plain averaging, entropy-coded 4-bit updates and broadcast, Muon inner
steps, H = 20 unless ``--h`` says otherwise, J = H) for 3,000 inner steps unless ``--rounds``
says otherwise. While it runs,
every final round's signed records are saved, and the data-parallel baseline trains on
exactly the tokens each round merged (``devnet.baseline``: the union of the included
islands' samples at each step, one model, the run's optimizer and schedule, from the same
warm start). Both curves use the aggregator's held-out loss function and samples.

Parts and resuming: the state directory keeps the records, the baseline's state after
each round, the network's own state and its report; a rerun skips what is done. The
network resumes where it stopped (the devnet's ``--resume``: every role restarts on its
state, the service and relay on the ports the records name, which ``port.txt`` keeps);
rounds whose commit windows passed while it was down close unmerged, as missed rounds
do. The baseline resumes at its last finished round. ``wall.json`` keeps each part's
running seconds (``network_running_s``: the network's time up, over every part).
Once the network has written its report, its blob stores (every round's models, updates
and checkpoints: about 30 GB for 200 rounds) are removed; the records, the report and the
baseline stay. ``--analyse`` only rewrites the result and the plot from the state. To
judge a run that will not be resumed: save its dashboard document as ``dashboard.json`` in the state
directory (``GET /v1/runs/devnet/dashboard``), then ``--baseline-only`` trains the
baseline on every saved round and writes the result with the traffic of the final rounds.

Writes ``benchmarks/results/longrun.json`` (final losses and gap, the moving average's
longest rise, bytes as docs/traffic.md counts them with the all-in ratio first,
utilisation, wall times, the commit the network ran), the per-round series of both arms in
``benchmarks/results/longrun/curves.json`` and ``docs/longrun.png`` (held-out loss against
tokens, both curves). ``make bench`` runs it only when named (``ARGS=longrun``): it takes
hours on two cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common import write_result
from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import RoundDetail
from hypertrain.data.dataset import Dataset
from hypertrain.data.descriptor import DESCRIPTOR_NAME
from hypertrain.devnet.baseline import BaselineStore, record_batches, train_on_records
from hypertrain.devnet.config import OPTIMIZERS
from hypertrain.devnet.roles import RUN_ID
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.recipe import INNER_OPTIMIZER, INNER_STEPS, WARM_START_PERCENT
from longrun_report import SEED, commit

ROOT = Path(__file__).resolve().parent.parent
PLOT = ROOT / "docs" / "longrun.png"
CURVES_FILE = ROOT / "benchmarks" / "results" / "longrun" / "curves.json"  # per-round series
POLL_S = 5.0
STEPS = 3000  # the rounds' inner steps: --rounds defaults to STEPS / H (200 at H = 15)


def main() -> int:
    args = parse_args()
    state: Path = args.state
    state.mkdir(parents=True, exist_ok=True)
    if args.network_child:
        return network_child(args)
    started = time.time()
    if args.baseline_only:
        baseline(state)
    elif not args.analyse:
        follow(args, state)
    result = analyse(state, wall_s=time.time() - started, recount=args.recount)
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, list)}, indent=1))
    return 0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=None,
                   help=f"rounds (default {STEPS} steps' worth: {STEPS} / H)")  # fmt: skip
    p.add_argument("--state", type=Path, default=ROOT / ".cache" / "longrun")
    p.add_argument("--budgets", default="1,1,1", help="micro-batches per step per island")
    p.add_argument("--preset", default="proxy")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--honeypot", default="bad-update")
    p.add_argument("--overlap", action="store_true",
                   help="overlapped rounds (writes longrun-overlap.json)")  # fmt: skip
    p.add_argument("--h", type=int, default=INNER_STEPS,
                   help="inner steps per round (files name an H but 15: -h20)")  # fmt: skip
    p.add_argument("--warm-start-percent", type=int, default=WARM_START_PERCENT,
                   help="warm start, %% of all steps (another: longrun-warmP.json)")  # fmt: skip
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=INNER_OPTIMIZER,
                   help="the islands' inner optimizer (default %(default)s, the recipe's;"
                   " at H = 15 muon writes longrun-muon.json, adamw longrun.json)")  # fmt: skip
    p.add_argument("--analyse", action="store_true", help="only write the result and plot")
    p.add_argument(
        "--recount",
        action="store_true",
        help="with --analyse: also count the run's traffic by this tree's rules",
    )
    p.add_argument(
        "--baseline-only",
        action="store_true",
        help="train the baseline on the saved rounds (no network), then write the result",
    )
    p.add_argument("--network-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rounds is None:
        args.rounds = STEPS // args.h
    return args


def network_child(args: argparse.Namespace) -> int:
    """The network itself: the product's devnet, run to its report."""
    from hypertrain.devnet.config import DevnetConfig
    from hypertrain.devnet.orchestrator import run_devnet

    budgets = tuple(int(b) for b in args.budgets.split(","))
    cfg = DevnetConfig(
        rounds=args.rounds,
        islands=len(budgets),
        island_budgets=budgets,
        preset=args.preset,
        seed=args.seed,
        port=args.port,
        state_dir=args.state / "network",
        cache_dir=ROOT / ".cache" / "devnet",
        exit_when_done=True,
        honeypot=args.honeypot,
        live_view=False,
        timeout_s=12 * 3600.0,
        baseline=False,  # this benchmark trains its own, resumable, beside the network
        resume=True,  # a stopped network goes on from its state (module docstring)
        overlap=args.overlap,
        warm_start_percent=args.warm_start_percent,
        inner_steps=args.h,
        optimizer=args.optimizer,
        keep=True,  # its state stays until the report is written
    )
    return run_devnet(cfg)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def follow(args: argparse.Namespace, state: Path) -> None:
    """Run the network (unless its report exists), saving each final round's records (a
    thread) and training the baseline round by round beside it."""
    report = state / "network" / "report.json"
    records = state / "records"
    records.mkdir(exist_ok=True)
    if not report.exists():
        port_file = state / "port.txt"  # the service's port, the same in every part
        if not port_file.exists():
            port_file.write_text(str(free_port()))
        port = int(port_file.read_text())
        cmd = [sys.executable, __file__, "--network-child", "--port", str(port)]
        cmd += ["--rounds", str(args.rounds), "--state", str(state), "--budgets", args.budgets]
        cmd += ["--preset", args.preset, "--seed", str(args.seed), "--honeypot", args.honeypot]
        cmd += ["--overlap"] if args.overlap else []
        cmd += ["--warm-start-percent", str(args.warm_start_percent), "--h", str(args.h)]
        cmd += ["--optimizer", args.optimizer]
        log = (state / "network.log").open("ab")
        child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        part_started = time.time()
        _note_wall(state, "network_started", first=True)
        commit_file = state / "commit.txt"  # the tree the network runs: the same in every part
        if commit_file.exists() and commit_file.read_text() != commit():
            raise SystemExit(f"the network started on {commit_file.read_text()}, not {commit()}")
        commit_file.write_text(commit())
        saver = threading.Thread(
            target=save_while, args=(f"http://127.0.0.1:{port}", records, child), daemon=True
        )
        saver.start()
        while child.poll() is None:
            baseline(state)
            time.sleep(POLL_S)
            _add_wall(state, "network_running_s", time.time() - part_started)
            part_started = time.time()
        saver.join()
        if child.returncode != 0:
            raise SystemExit(f"the network exited with {child.returncode}: see network.log")
        _note_wall(state, "network_finished")
        prune_blobs(state)
    baseline(state)
    _note_wall(state, "baseline_finished")


# The network's blob stores: every round's models, updates and audited checkpoints (about
# 30 GB over 200 rounds of the proxy model). The result reads only the records, the report
# and the baseline, so they go once the network has written its report.
BLOB_STORES = ("relay", "aggregator", "witness", "islands")


def prune_blobs(state: Path) -> None:
    """Remove the finished network's blob stores (``BLOB_STORES``)."""
    for name in BLOB_STORES:
        shutil.rmtree(state / "network" / "state" / name, ignore_errors=True)


def _note_wall(state: Path, what: str, *, first: bool = False) -> None:
    """Record when ``what`` happened (``first``: only the first time)."""
    path = state / "wall.json"
    wall = json.loads(path.read_text()) if path.exists() else {}
    if not (first and what in wall):
        wall[what] = time.time()
    path.write_text(json.dumps(wall))


def _add_wall(state: Path, what: str, seconds: float) -> None:
    """Add ``seconds`` to the running total ``what``."""
    path = state / "wall.json"
    wall = json.loads(path.read_text()) if path.exists() else {}
    wall[what] = wall.get(what, 0.0) + seconds
    path.write_text(json.dumps(wall))


def save_while(url: str, records: Path, child: subprocess.Popen[bytes]) -> None:
    with ChallengeClient(url) as service:
        while child.poll() is None:
            save_records(service, records)
            time.sleep(1.0)


def save_records(service: ChallengeClient, records: Path) -> None:
    """Every final round's detail and the manifest, once each (a missing service is
    a network still starting: asked again at the next poll)."""
    try:
        if not (records / "manifest.json").exists():
            manifest = service.manifest(RUN_ID)
            _write_whole(records / "manifest.json", manifest.model_dump_json())
        for summary in service.rounds(RUN_ID):
            path = records / f"{summary.round:05d}.json"
            if summary.phase == "final" and not path.exists():
                detail = service.round_detail(RUN_ID, summary.round)
                _write_whole(path, detail.model_dump_json())
    except (ServiceError, OSError):
        return


def _write_whole(path: Path, text: str) -> None:
    """Write ``path`` under a temporary name, then rename it: the main loop, which reads the
    records while this thread writes them, never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def load_records(state: Path) -> tuple[RunManifest, list[RoundDetail]]:
    records = state / "records"
    manifest = RunManifest.model_validate_json((records / "manifest.json").read_text())
    details: list[RoundDetail] = []
    for path in sorted(records.glob("0*.json")):
        detail = RoundDetail.model_validate_json(path.read_text())
        if detail.round != len(details):
            break  # a gap: only the prefix of consecutive rounds is usable
        details.append(detail)
    return manifest, details


def open_dataset(manifest: RunManifest) -> Dataset:
    """The devnet's prepared dataset whose descriptor the run's manifest names."""
    cache = ROOT / ".cache" / "devnet"
    for descriptor in sorted(cache.glob(f"dataset-*/{DESCRIPTOR_NAME}")):
        try:
            return Dataset(descriptor, expected_sha256=manifest.data.descriptor_sha256)
        except ValueError:
            continue
    raise SystemExit(f"no prepared dataset in {cache} matches the run's descriptor")


def baseline(state: Path) -> list[float]:
    """Train the baseline on every saved round it has not trained yet."""
    if not (state / "records" / "manifest.json").exists():
        return []
    manifest, details = load_records(state)
    if not details:
        return []
    store = BaselineStore(state / "baseline", manifest)
    return train_on_records(manifest, open_dataset(manifest), details, store)


def network_report(state: Path, manifest: RunManifest) -> dict[str, Any] | None:
    """The network's report, or, for a run stopped before its end, the same traffic
    figures from its last saved dashboard document (``dashboard.json``, the final rounds
    only, by the report's own functions)."""
    from hypertrain.devnet.report import traffic_summary, warm_start_row

    path = state / "network" / "report.json"
    if path.exists():
        report: dict[str, Any] = json.loads(path.read_text())
        return report
    saved = state / "dashboard.json"
    if not saved.exists():
        return None
    doc = json.loads(saved.read_text())
    rounds = [r for r in doc["rounds"] if r["phase"] == "final"]
    warm = warm_start_row(manifest, len(doc["islands"]))
    return {
        "traffic": traffic_summary(rounds, warm),
        "warm_start": warm,
        "stopped_at_round": len(rounds),
    }


def recounted_report(state: Path, manifest: RunManifest) -> dict[str, Any]:
    """The run's traffic counted by this tree's rules from the run's own service records
    (its database and final dashboard document): ``dashboard.traffic.round_traffic`` per
    final round, summed by the report's function. For a run made before a change of what
    islands upload (the bytes of training are unchanged), what the same rounds, audits and
    verdicts move on this tree."""
    from types import SimpleNamespace

    from hypertrain.challenge.dashboard.document import param_count
    from hypertrain.challenge.dashboard.traffic import round_traffic
    from hypertrain.challenge.database import reader
    from hypertrain.devnet.report import traffic_summary, warm_start_row

    network = state / "network"
    doc = json.loads((network / "report-dashboard.json").read_text())
    conn = reader(network / "state" / "service")  # the service's own read connection
    params, rows = param_count(manifest.model), []
    try:
        for r in (r for r in doc["rounds"] if r["phase"] == "final"):
            summary = SimpleNamespace(round=r["round"], update_bytes=r["update_bytes"])
            count = round_traffic(conn, doc["run_id"], manifest, summary, params)  # type: ignore[arg-type]
            rows.append({"round": r["round"], "traffic": count.ours.parts(),
                         "data_parallel_bytes": count.data_parallel,
                         "probation": count.probation})  # fmt: skip
    finally:
        conn.close()
    warm = warm_start_row(manifest, len(doc["islands"]))
    return {"traffic": traffic_summary(rows, warm), "warm_start": warm}


def analyse(state: Path, *, wall_s: float, recount: bool = False) -> dict[str, Any]:
    """longrun.json and the plot, from the state directory (``recount``: also the traffic
    by this tree's rules, :func:`recounted_report`)."""
    from longrun_report import CURVES, build_result, plot, recount_note, result_tag

    manifest, details = load_records(state)
    report = network_report(state, manifest)
    losses = BaselineStore(state / "baseline", manifest).losses()
    wall = json.loads((state / "wall.json").read_text()) if (state / "wall.json").exists() else {}
    dataset = open_dataset(manifest)
    samples = [sum(len(b) for b in r) for r in record_batches(manifest, dataset, details)]
    path = state / "commit.txt"
    measured = path.read_text().strip() if path.exists() else commit()
    result = build_result(manifest, details, report, losses, wall, samples, measured)
    if recount:
        result["traffic_recounted"] = recount_note(recounted_report(state, manifest), commit())
    tag = result_tag(manifest)  # a variant of the recipe: its own files
    plot(result, PLOT.with_name(f"longrun{tag}.png"))
    curves = {k: result.pop(k) for k in CURVES}
    curves_file = CURVES_FILE.with_name(f"curves{tag}.json")
    curves_file.parent.mkdir(parents=True, exist_ok=True)
    curves_file.write_text(json.dumps({"commit": measured, **curves}) + "\n")
    write_result(f"longrun{tag}", result, targets=result.pop("targets"), notes=result.pop("notes"))
    return result


if __name__ == "__main__":
    sys.exit(main())
