"""The dashboard in real headless Chromium (Debian's package) driven by Playwright.

A live service on loopback is driven through two real rounds (three islands, one
caught by an audit) and given a baseline curve; the page must show every panel's data,
the chart must be readable with the keyboard, and the unreachable and unknown-run
states must be explicit. A screenshot is saved under test-artifacts/. In CI
(``CI=true``) a missing browser fails the test instead of skipping it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from hypertrain.api.baseline import DEFAULT_LABEL as LABEL
from hypertrain.challenge.app import create_app
from hypertrain.dispute import opinputs
from hypertrain.protocol.honeypots import HoneypotEntry, HoneypotList, commitment
from hypertrain.protocol.identity import Hotkey
from tests.challenge.dashdata import run_rounds
from tests.challenge.disputeplay import TENSORS, TREE, open_body, play_to_referee
from tests.challenge.helpers import (
    FakeLedger,
    SteppedBeacon,
    bearer,
    make_settings,
    manifest_doc,
    signed,
)

CHROMIUM = Path(os.environ.get("HYPERTRAIN_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_browser() -> Path:
    """The Chromium binary, or skip (locally) / fail (in CI) when it is missing."""
    if CHROMIUM.exists() or shutil.which(str(CHROMIUM)):
        return CHROMIUM
    message = f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


class LiveHarness:
    """The attributes run_rounds uses, over real HTTP; the beacon is stepped by hand."""

    def __init__(self, base: str, beacon: SteppedBeacon, miners: list[Any], auditor: Any) -> None:
        self.client = httpx.Client(base_url=base, timeout=10)
        self.beacon, self.miners, self.auditor = beacon, miners, auditor

    def tick(self, rounds: int = 1) -> None:
        target = self.beacon.round + rounds
        self.beacon.round = target
        deadline = time.monotonic() + 30
        while not self._caught_up(target):
            assert time.monotonic() < deadline, "the service did not act on the beacon round"
            time.sleep(0.02)

    def _caught_up(self, target: int) -> bool:
        """The service saw ``target`` and every round machine has moved as far as it allows."""
        if self.client.get("/v1/beacon").json()["round"] != target:
            return False
        for run in self.client.get("/v1/runs").json():
            for rnd in self.client.get(f"/v1/runs/{run['run_id']}/rounds").json():
                if rnd["phase"] == "beacon":
                    return False
                if rnd["phase"] == "train" and target > rnd["commit_deadline_round"]:
                    return False
                if rnd["phase"] == "audit" and target >= rnd["audit_close_round"]:
                    return False
        return True


REFEREE = Hotkey.from_seed(b"\x66" * 32)


def _honeypots(miners: list[Hotkey]) -> HoneypotList:
    """Islands 0 and 1 honest honeypots, island 2 the cheat that round 0 catches."""
    return HoneypotList(
        salt="5a" * 32,
        entries=[
            HoneypotEntry(hotkey=miners[0].ss58_address, role="island", strategy="honest"),
            HoneypotEntry(hotkey=miners[1].ss58_address, role="island", strategy="honest"),
            HoneypotEntry(hotkey=miners[2].ss58_address, role="island", strategy="wrong-samples"),
        ],
    )


def _dispute(h: LiveHarness, index: int) -> None:
    """In round 0 the caught island disputes; the game narrows and the referee upholds."""
    if index != 0:
        return
    cheat = h.miners[2]
    detail = h.client.get("/v1/runs/run-1/rounds/0").json()
    verdict = next(
        v for v in detail["verdicts"] if v["envelope"]["body"]["hotkey"] == cheat.ss58_address
    )
    segment = verdict["envelope"]["body"]["first_bad_leaf"] - 1  # the one it may contest
    body = open_body(verdict["verdict_id"], segment)
    r = h.client.post("/v1/disputes", json=signed(cheat, "dispute-open", body))
    assert r.status_code == 200, r.text
    dispute_id = r.json()["dispute_id"]
    game = play_to_referee(h.client, "run-1", dispute_id, cheat, h.auditor)
    assert game["stage"] == "referee", game
    data = opinputs.encode(TENSORS)
    r = h.client.put(f"/v1/disputes/{dispute_id}/inputs", content=data)
    assert r.status_code == 200, r.text
    ruling = {
        "dispute_id": dispute_id,
        "query": r.json()["game"]["query"],
        "inputs_sha256": hashlib.sha256(data).hexdigest(),
        "outputs": game["outputs"]["auditor"],
    }
    r = h.client.post(
        f"/v1/disputes/{dispute_id}/ruling", json=signed(REFEREE, "dispute-ruling", ruling)
    )
    assert r.status_code == 200 and r.json()["game"]["outcome"] == "upheld", r.text


def _admin(h: LiveHarness, method: str, path: str, body: Any) -> None:
    r = h.client.request(method, path, json=body, headers=bearer("admin"))
    assert r.status_code == 200, r.text


@pytest.fixture
def live(tmp_path: Path, miner_keys: list[Any]) -> Iterator[tuple[str, uvicorn.Server]]:
    auditor = Hotkey.from_seed(b"\x55" * 32)
    settings = make_settings(tmp_path, [k.ss58_address for k in miner_keys])
    beacon = SteppedBeacon()
    app = create_app(settings, beacon=beacon, ledger=FakeLedger())
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # bound here and handed to uvicorn: no port race
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "service did not start"
        time.sleep(0.05)
    h = LiveHarness(base, beacon, miner_keys, auditor)
    doc = manifest_doc()
    # the schedule plans the two rounds the fixture runs: the dashboard's total and "finished"
    doc["inner"] = {**doc.get("inner", {}), "total_steps": 2 * doc["round"]["inner_steps"]}
    doc["dispute"] = {
        "bond": 0, "answer_rounds": 5, "referee_rounds": 5, "referees": [REFEREE.ss58_address]
    }  # fmt: skip
    honeypots = _honeypots(miner_keys)
    doc["honeypots"] = {"commitment": commitment(honeypots), "reveal_round": 0}
    _admin(h, "POST", "/admin/v1/runs", {"manifest": doc})
    run_rounds(h, rounds=2, checkpoint_root=TREE.root_hex, after_verdicts=_dispute)  # type: ignore[arg-type]
    _admin(h, "POST", "/admin/v1/runs/run-1/honeypots", honeypots.model_dump(mode="json"))
    _admin(h, "PUT", "/admin/v1/runs/run-1/baseline", {"heldout_loss": [4.4, 3.9]})  # per round
    try:
        yield base, server
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_dashboard_in_chromium(live: tuple[str, uvicorn.Server]) -> None:
    executable = require_browser()
    from playwright.sync_api import expect, sync_playwright

    base, server = live
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(executable), args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{base}/dashboard/")  # the total and "finished" come from the service
        expect(page.locator("#conn")).to_have_text("Connected: run run-1", timeout=15000)
        glance = page.locator("#glance-tiles")
        expect(glance).to_contain_text("4.0000")
        expect(glance).to_contain_text("2 / 2")
        expect(glance.locator(".tile.status")).to_contain_text("finished")
        expect(glance.locator(".tile").nth(2)).to_contain_text("2")  # the roster's, not commits
        expect(glance).to_contain_text("12,000")
        expect(page.locator("#model-body")).to_contain_text("Parameters")
        expect(page.locator("#model-body")).to_contain_text("momentum 0.9")
        expect(page.locator("#islands-body .island")).to_have_count(3)
        expect(page.locator("#roster-table tbody tr")).to_have_count(3)
        expect(page.locator("#roster-table")).to_contain_text("faulted")
        expect(page.locator("#rounds-table tbody tr")).to_have_count(2)
        audits = page.locator("#audits-table")
        expect(audits).to_contain_text("caught")
        expect(audits.locator("a", has_text="beacon #101").first).to_be_visible()
        chart = page.locator("#chart")
        chart.focus()
        page.keyboard.press("Home")
        expect(page.locator("#chart-readout")).to_have_text(
            f"Round 0: held-out loss 4.5000 (1 of 2); {LABEL}: 4.4000"
        )
        page.keyboard.press("ArrowRight")
        expect(page.locator("#chart-readout")).to_contain_text("Round 1: held-out loss 4.0000")
        expect(page.locator("#curve-table tbody tr")).to_have_count(2)
        expect(page.locator("#chart polyline.line.base")).to_have_count(1)
        expect(page.locator("#chart-legend li.base")).to_contain_text(LABEL)
        gap = f"held-out loss 4.0000 ({LABEL}: 3.9000, +2.6 %)"  # 4.0 / 3.9 = 1.0256
        expect(page.locator("#curve-summary .gap")).to_contain_text(gap)
        check_new_panels(page, httpx.get(f"{base}/v1/runs/run-1/dashboard").json())
        page.screenshot(path=str(ARTIFACTS / "dashboard-test.png"), full_page=True)
        assert errors == []
        check_empty_states(browser, base)

        page.goto(f"{base}/dashboard/?run=nope")
        expect(page.locator("#notice")).to_contain_text('Run "nope" was not found')

        page.goto(f"{base}/dashboard/")
        expect(page.locator("#conn")).to_have_text("Connected: run run-1", timeout=15000)
        server.should_exit = True
        expect(page.locator("#notice")).to_contain_text("unreachable", timeout=15000)
        expect(page.locator("#glance-tiles")).to_contain_text("4.0000")  # last data kept
        browser.close()


def check_new_panels(page: Any, doc: dict[str, Any]) -> None:
    """Each panel added for the run page, checked against the same JSON document."""
    from playwright.sync_api import expect

    st = doc["round_stations"]
    expect(page.locator("#stations-list li")).to_have_count(len(st["stations"]))
    lit = page.locator("#stations-list li.on")
    expect(lit).to_have_count(1)
    expect(lit).to_have_attribute("data-station", st["current"])
    expect(lit).to_have_attribute("aria-current", "step")
    check_station_motion(page, lit)

    spec = doc["model"]["spec"]
    arch = page.locator("#arch-body")
    expect(arch).to_contain_text(f"Decoder block × {spec['num_layers']}")
    expect(arch).to_contain_text(f"Token embedding {spec['vocab_size']} × {spec['d_model']}")
    expect(arch).to_contain_text(f"{spec['num_heads']} heads × {spec['head_dim']}")
    expect(arch).to_contain_text(f"{spec['d_model']} → {spec['ffn_hidden']} → {spec['d_model']}")
    expect(arch).to_contain_text("tied with the token embedding")
    expect(arch).to_contain_text("Close-up: causal multi-head self-attention")
    expect(arch).to_contain_text("Close-up: SwiGLU feed-forward")

    m = doc["model"]
    sync = page.locator("#sync-body")
    expect(sync).to_contain_text(f"{m['inner']['name']} × {m['inner']['steps_per_round']} local")
    expect(sync).to_contain_text(f"lr {m['outer']['lr']}, momentum {m['outer']['momentum']}")

    cs = doc["curve_summary"]
    summary = page.locator("#curve-summary")
    expect(summary).to_contain_text(f"{cs['lowest']['loss']:.4f} · r{cs['lowest']['round']}")
    expect(summary).to_contain_text(f"Started at{cs['start']['loss']:.4f}")
    expect(summary).to_contain_text(f"{cs['synced_rounds']} of {cs['rounds']}")
    expect(summary).to_contain_text("Largest spike" + ("none" if cs["spike"] is None else ""))

    cards = page.locator("#islands-body .island")
    for n, isl in enumerate(doc["islands"]):
        card = cards.nth(n)
        expect(card.locator("h3")).to_contain_text(isl["name"])
        expect(card.locator(".region")).to_have_text(isl["region"] or "not reported")
        expect(card.locator(".tokens")).to_have_text(f"{isl['tokens']:,}")
        squares = sum(len(node["devices"]) for node in isl["nodes"])
        expect(card.locator(".dev")).to_have_count(squares)
        expect(card.locator(".node")).to_have_count(len(isl["nodes"]))
        expect(card.locator(".sync")).to_contain_text(f"round {isl['last_sync_round']}")

    by_tokens = sorted(doc["islands"], key=lambda i: (-i["tokens"], i["hotkey"]))
    rows = page.locator("#roster-table tbody tr")
    expect(rows.first.locator("td").nth(2)).to_have_text(by_tokens[0]["name"])
    expect(rows.first.locator(".rank")).to_have_text("1")
    tokens_header = page.locator("#roster-table thead th[data-sort='tokens']")
    tokens_header.locator("button").click()  # most tokens first
    expect(tokens_header).to_have_attribute("aria-sort", "descending")
    tokens_header.locator("button").click()  # fewest first
    expect(tokens_header).to_have_attribute("aria-sort", "ascending")
    expect(rows.first.locator("td").nth(2)).to_have_text(by_tokens[-1]["name"])
    page.locator("#roster-table thead th[data-sort='rank'] button").click()

    check_dispute_honeypot_traffic(page, doc)
    check_figures_agree(page, doc)


def check_station_motion(page: Any, lit: Any) -> None:
    """The marker sits on the lit station and hops there when the round moved since the last
    poll; a poll that finds the round where it was moves nothing; the commit station pulses;
    a merge flashes the settle station."""
    from playwright.sync_api import expect

    expect(lit.locator(".marker")).to_have_count(1)
    expect(page.locator("#stations-list .marker")).to_have_count(1)
    motions = page.evaluate(
        """() => {
          ui.station = { round: 3, current: "audit", done: 2 };
          const moved = stationMotion({ round: 3, current: "commit" }, 2)("commit");
          const still = stationMotion({ round: 3, current: "commit" }, 2)("commit");
          ui.station = { round: 3, current: "settle", done: 2 };
          const merged = stationMotion({ round: 3, current: "settle" }, 3)("settle");
          return [moved, still, merged];
        }"""
    )
    assert motions == ["hop pulse", None, "flash"], motions
    page.evaluate("() => { ui.station = null; tick(); }")  # the next poll moves the marker in
    expect(lit).to_have_attribute("data-motion", re.compile("hop"))
    name = page.evaluate(
        "() => getComputedStyle(document.querySelector('#stations-list .marker')).animationName"
    )
    assert name == "hop", name


def check_figures_agree(page: Any, doc: dict[str, Any]) -> None:
    """One figure, one value: the glance tiles say what the round table and the island
    cards show (merged rounds of the manifest's total; islands of the roster)."""
    from playwright.sync_api import expect

    g = doc["glance"]
    merged = [r for r in doc["rounds"] if r["phase"] in ("settle", "final")]
    assert g["rounds_done"] == len(merged)
    tiles = page.locator("#glance-tiles")
    expect(tiles).to_contain_text(f"Outer rounds done{len(merged)} / {g['rounds_total']}")
    taking_part = [i for i in doc["islands"] if i["status"] in ("active", "probation")]
    assert g["islands"] == len(taking_part)
    expect(tiles).to_contain_text(f"Islands taking part{len(taking_part)}")
    expect(page.locator("#islands-body .island")).to_have_count(len(doc["islands"]))
    expect(page.locator("#rounds-table tbody tr")).to_have_count(min(len(doc["rounds"]), 12))
    expect(tiles).to_contain_text(f"Run status{g['status']}")
    expect(page.locator("header nav a[href='mine.html']")).to_have_text("How to mine")


def check_dispute_honeypot_traffic(page: Any, doc: dict[str, Any]) -> None:
    """The disputes, honeypots and traffic panels, filled by the run, against the JSON."""
    from playwright.sync_api import expect

    assert len(doc["disputes"]) == 1
    game = doc["disputes"][0]
    row = page.locator(f"#disputes-table tr[data-dispute='{game['dispute_id']}']")
    expect(row.locator("ol.steps li")).to_have_count(len(game["steps"]))
    levels = [st["level"] for st in game["steps"]]
    assert levels == ["open", "step", "layer", "op", "referee", "decided"], levels
    for n, st in enumerate(game["steps"]):
        item = row.locator("ol.steps li").nth(n)
        expect(item).to_have_attribute("data-level", st["level"])
        expect(item).to_contain_text(st["text"])
    where = row.locator(".where")
    expect(where).to_contain_text(f"step {game['step']}")
    expect(where).to_contain_text(game["section"])
    expect(where).to_contain_text(game["op"])
    expect(row.locator(".referee")).to_have_attribute("title", game["referee"])
    expect(row.locator(".outcome")).to_contain_text(game["outcome"])
    expect(row.locator(".deadline")).to_contain_text(
        f"decided at beacon {game['decided_beacon_round']}"
    )

    check_honeypot_rows(page, doc["honeypots"])
    cheat = next(r for r in doc["honeypots"]["rows"] if r["strategy"] == "wrong-samples")
    assert (cheat["caught"], cheat["disputes_lost"]) == (1, 1)
    check_traffic(page, doc["traffic"])


def check_honeypot_rows(page: Any, hp: dict[str, Any]) -> None:
    """A revealed honeypot list fills the panel: one row per role and strategy, its rates."""
    from playwright.sync_api import expect

    assert hp["revealed"] and hp["rows"]
    expect(page.locator("#honeypots-table tbody tr")).to_have_count(len(hp["rows"]))
    for r in hp["rows"]:
        line = page.locator(f"#honeypots-table tr[data-strategy='{r['role']}:{r['strategy']}']")
        for cls, rate in ((".catch", r["catch_rate"]), (".fp", r["false_positive_rate"])):
            want = "—" if rate is None else f"{100 * rate:.1f} %".replace(".0 %", " %")
            expect(line.locator(cls)).to_have_text(want)


def check_traffic(page: Any, t: dict[str, Any]) -> None:
    """One traffic figure: the tile and the panel print the service's words."""
    from playwright.sync_api import expect

    assert t["all"]["ratio"] is not None and t["all"]["ratio"] > 0
    expect(page.locator("#traffic-table tr.all .ratio")).to_have_text(t["all"]["words"])
    shown = t["steady"] if t["steady"]["rounds"] else t["all"]
    expect(page.locator("#glance-tiles")).to_contain_text(shown["words"])
    expect(page.locator("#traffic-table tr.all .honest")).not_to_have_text("—")


def check_empty_states(browser: Any, base: str) -> None:
    """Before a reveal, and before any traffic or dispute, each panel says so."""
    from playwright.sync_api import expect

    real = httpx.get(f"{base}/v1/runs/run-1/dashboard").json()
    early = {
        **real,
        "disputes": [],
        "honeypots": {
            **real["honeypots"],
            "revealed": False,
            "revealed_beacon_round": None,
            "rows": [],
        },
        "traffic": {
            **real["traffic"],
            "all": {**real["traffic"]["all"], "honest_bytes": 0, "data_parallel_bytes": 0},
        },
    }
    page = browser.new_page()
    page.route("**/v1/runs/run-1/dashboard", lambda route: route.fulfill(json=early))
    page.goto(f"{base}/dashboard/?run=run-1")
    expect(page.locator("#disputes-body")).to_contain_text("No disputes in this run.")
    expect(page.locator("#honeypots-body")).to_contain_text("Not revealed yet")
    expect(page.locator("#honeypots-body")).to_contain_text("round 0 is final")
    expect(page.locator("#traffic-body")).to_contain_text("No round has moved any bytes yet.")
    page.close()
