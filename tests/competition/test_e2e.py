"""Competition mode end to end: real beacon, service, relay, evaluator and miner commands.

Hotkeys submit briefly trained tiny Llama models through ``hypertrain-miner
compete``: an incumbent, a newcomer a hair better (within epsilon), a clearly better
one, a model that learned the published dataset's held-out split by heart (every
outsider can read it: it would take the weight if those pages were scored), a copy of
the clearly better one committed after its reveal, and a hostile model whose loading
raises inside ``transformers``. The pages come from a secret pool the operator hands
the service at creation (committed by its Merkle root, each cycle's pages revealed only
at its beacon round). An evaluator process scores each cycle; the hostile model is
refused and the evaluator goes on to the next cycle; the clearly better model takes the
weight in ``get_weights``, the memorizer and the within-epsilon newcomer rank below it,
and the copy is never scored.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hypertrain.api.competition import CompetitionClient
from hypertrain.beacon import LocalBeaconProcess, start_local_beacon
from hypertrain.evaluator.scorer import page_batch
from hypertrain.miner.compete import commit_model, upload_model
from hypertrain.protocol.identity import write_key_file
from tests.challenge.test_dashboard_browser import ARGS, require_browser
from tests.competition import models
from tests.competition.models import Trained
from tests.e2e.launch import REPO, Fleet, http_ok, listener, port_of, wait_for
from tests.e2e.network import TOKENS, service_env, write_metagraph, write_secrets

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
CID = "comp-e2e"
NAMES = ("incumbent", "close", "better", "public", "copier", "hostile")
SCORED = ("incumbent", "close", "better", "public", "hostile")  # the hostile one: refused, rate 0


@pytest.fixture
def beacon(tmp_path: Path) -> Iterator[LocalBeaconProcess]:
    with start_local_beacon(tmp_path / "beacon", period_s=1) as b:
        yield b


def _miner(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "hypertrain.miner.cli", "compete", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return doc


def _wait_round_after(service: str, round_: int) -> None:
    wait_for(
        lambda: httpx.get(f"{service}/v1/beacon").json()["round"] > round_, 60, "a beacon round"
    )


def test_competition_end_to_end(
    tmp_path: Path, beacon: LocalBeaconProcess, trained: Trained
) -> None:
    keys = {
        n: (tmp_path / "keys" / n, write_key_file(bytes([0x70 + i]) * 32, tmp_path / "keys" / n))
        for i, n in enumerate((*NAMES, "evaluator"))
    }
    miners = [keys[n][1].ss58_address for n in NAMES]
    evaluator = keys["evaluator"][1].ss58_address
    sec = write_secrets(tmp_path, "78" * 32)
    secrets = sec.tokens
    write_metagraph(tmp_path / "metagraph.json", {h: i for i, h in enumerate(miners)}, block=1)
    (tmp_path / "allow.json").write_text(json.dumps(miners))
    svc_sock, relay_sock = listener(), listener()
    svc_port, relay_port = port_of(svc_sock), port_of(relay_sock)
    service, relay = f"http://127.0.0.1:{svc_port}", f"http://127.0.0.1:{relay_port}"
    fleet = Fleet(tmp_path / "logs", env={**os.environ, "PYTHONUNBUFFERED": "1"})
    svc_env = service_env(tmp_path, beacon.url, sec, [evaluator])
    dirs = {
        "incumbent": models.export(trained.weak, trained.spec, tmp_path / "m" / "incumbent"),
        "close": models.export(trained.slightly, trained.spec, tmp_path / "m" / "close"),
        "better": models.export(trained.strong, trained.spec, tmp_path / "m" / "better"),
        "public": models.export(trained.public, trained.spec, tmp_path / "m" / "public"),
        "hostile": _hostile(trained, tmp_path / "m" / "hostile"),
    }
    models.pool_dataset(trained.dataset_dir.parent, tmp_path / "secret")
    _check_public_would_win(trained, dirs)
    try:
        fleet.hypertrain("service", "challenge", "serve", env=svc_env, sock=svc_sock)
        fleet.hypertrain(
            "relay", "relay", "serve",
            "--storage", str(tmp_path / "blobs"), "--allow-list", str(tmp_path / "allow.json"),
            "--beacon-genesis-unix", str(beacon.chain.genesis_time),
            "--beacon-period-s", str(beacon.chain.period_s), sock=relay_sock,
        )  # fmt: skip
        wait_for(lambda: http_ok(f"{service}/v1/beacon") and http_ok(f"{relay}/health"), 60,
                 "service and relay")  # fmt: skip
        wait_for(lambda: httpx.get(f"{service}/v1/beacon").json()["round"], 30, "a beacon round")
        spec = models.spec_doc(trained.dataset, CID)
        spec["data"] = {k: v for k, v in spec["data"].items() if not k.startswith("pool_")}
        spec["cycle"] = {"eligibility_delay_rounds": 2, "eval_interval_rounds": 10,
                         "score_window_rounds": 240,  # 240 s on this 1 s beacon
                         "model_time_limit_s": 200}  # fmt: skip
        spec["evaluators"] = [evaluator]
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(json.dumps(spec))
        created = subprocess.run(
            [sys.executable, "-m", "hypertrain.cli", "competition", "create", "--service-url",
             service, "--admin-token-file", str(secrets["admin"]),
             "--pool-dir", str(tmp_path / "secret" / "pool"), str(spec_file)],
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr

        def common(name: str) -> list[str]:
            return [
                "--service-url",
                service,
                "--competition",
                CID,
                "--key-file",
                str(keys[name][0]),
            ]

        first = _miner("commit", *common("incumbent"), "--model-dir", str(dirs["incumbent"]))
        _miner("upload", *common("incumbent"), "--model-dir", str(dirs["incumbent"]),
               "--relay-url", relay)  # fmt: skip
        _wait_round_after(service, first["commit_beacon_round"])
        with CompetitionClient(service) as client:  # the same calls, in this process
            for name in ("close", "better", "public", "hostile"):
                commit_model(client, keys[name][1], CID, dirs[name])
            for name in ("close", "better", "public", "hostile"):
                upload_model(client, relay, keys[name][1], CID, dirs[name])
            copied = shutil.copytree(dirs["better"], tmp_path / "m" / "copier")
            copy_sha, _ = commit_model(client, keys["copier"][1], CID, copied)
            upload_model(client, relay, keys["copier"][1], CID, copied)

        fleet.hypertrain(
            "evaluator", "competition", "evaluate", "--service-url", service, "--competition", CID,
            "--key-file", str(keys["evaluator"][0]),
            "--worker-token-file", str(secrets["worker"]),
            "--cache-dir", str(tmp_path / "cache"),
            "--follow", "--poll-s", "0.5",
        )  # fmt: skip

        def board() -> dict[str, Any]:
            doc: dict[str, Any] = httpx.get(
                f"{service}/v1/competitions/{CID}/leaderboard", timeout=5
            ).json()
            return doc

        def all_scored() -> dict[str, Any] | None:
            fleet.check_alive("service", "relay", "evaluator")
            doc = board()
            scored = [c for c in doc["competitors"] if c["win_rate"] is not None]
            return doc if len(scored) == len(SCORED) else None

        full = wait_for(all_scored, 600, "a cycle scoring every model", poll_s=1)
        by_name = {
            n: c
            for n in NAMES
            for c in full["competitors"]
            if c["hotkey"] == keys[n][1].ss58_address
        }
        assert full["competitors"][0]["hotkey"] == keys["better"][1].ss58_address
        assert (
            by_name["incumbent"]["win_rate"] >= by_name["close"]["win_rate"]
        )  # close may not count
        assert by_name["copier"]["status"] == "duplicate" and by_name["copier"]["win_rate"] is None
        assert copy_sha == by_name["better"]["model_sha256"]
        # the memorizer's pages were public, the scored ones secret: it loses to the better
        assert by_name["public"]["win_rate"] < by_name["better"]["win_rate"], by_name
        assert by_name["public"]["weight"] < 0.05, by_name["public"]
        # the hostile model (its loading raises inside transformers) is a refusal, weightless
        assert by_name["hostile"]["weight"] == 0.0
        record = httpx.get(f"{service}/v1/competitions/{CID}/cycles/{full['latest_cycle']}").json()
        refusals = [s["body"]["refused"] for s in record["scores"]]
        assert any("TypeError" in r for r in refusals), refusals
        scored_cycle = full["latest_cycle"]
        wait_for(lambda: (board()["latest_cycle"] or -1) > scored_cycle, 200,
                 "the next cycle, scored by the same evaluator", poll_s=1)  # fmt: skip
        fleet.check_alive("evaluator")
        internal = {"authorization": f"Bearer {TOKENS['internal']}",
                    "x-platform-challenge-slug": "hypertrain"}  # fmt: skip
        weights = httpx.get(
            f"{service}/internal/v1/get_weights", params={"epoch": 1}, headers=internal
        ).json()["weights"]
        # a cycle before every model was revealed may have paid the incumbent alone; from the
        # first cycle that scored all three, the clearly better model takes the pool
        better = keys["better"][1].ss58_address
        assert weights[better] == max(weights.values())
        assert by_name["better"]["weight"] > 0.95
        for name in ("close", "public"):
            assert weights.get(keys[name][1].ss58_address, 0) < 0.05 * weights[better], weights
        assert keys["copier"][1].ss58_address not in weights
        leaderboard_cli = subprocess.run(
            [sys.executable, "-m", "hypertrain.cli", "competition", "leaderboard", "--service-url",
             service, "--competition", CID],
            cwd=REPO, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert "duplicate" in leaderboard_cli.stdout
        _check_page(service, board())
    finally:
        fleet.stop()


def _check_public_would_win(trained: Trained, dirs: dict[str, Path]) -> None:
    """On the public held-out pages the memorizer would take the weight from the better
    model (committed before it, as in the competition): only the pool's secrecy stops it."""
    ds = trained.dataset
    pages = page_batch(ds, [int(i) for i in ds.split().heldout_ids[:24]])
    losses = (models.page_losses_of(dirs[n], ds, pages) for n in ("better", "public"))
    assert models.weight_taker(ds, *losses) == "newer"


def _hostile(trained: Trained, out: Path) -> Path:
    """A model that passes every check but whose loading raises a TypeError."""
    directory = models.export(trained.weak, trained.spec, out)
    config = json.loads((directory / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": "x"}
    (directory / "config.json").write_text(json.dumps(config))
    return directory


def _check_page(service: str, board: dict[str, Any]) -> None:
    """The leaderboard page in headless Chromium shows the JSON's rows, best first."""
    browser_path = require_browser()
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(browser_path), args=ARGS)
        page = browser.new_page()
        page.goto(f"{service}/dashboard/competition.html?competition={CID}")
        rows = page.locator("#board-table tbody tr")
        expect(rows).to_have_count(len(board["competitors"]))
        first = board["competitors"][0]
        expect(rows.first).to_have_attribute("data-hotkey", first["hotkey"])
        expect(page.locator("#board-tiles")).to_contain_text(CID)
        browser.close()
