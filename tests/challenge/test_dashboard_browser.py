"""The dashboard in real headless Chromium (Debian's package) driven by Playwright.

A live service on loopback is driven through two real rounds (three islands, the
honeypot caught by an audit in the one round it cheats) and given a baseline curve
(``tests.challenge.dashbrowser``); the page must show every panel's data
(``tests.challenge.dashchecks``), the chart must be readable with the keyboard, and the
unreachable and unknown-run states must be explicit. A screenshot is saved under
test-artifacts/. The devnet's end-to-end test imports the browser and the checks from here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from hypertrain.api.baseline import DEFAULT_LABEL as LABEL
from tests.challenge.dashbrowser import ARGS, ARTIFACTS, live_service, require_browser
from tests.challenge.dashchecks import (
    check_empty_states,
    check_figures_agree,
    check_honeypot_rows,
    check_new_panels,
    check_no_clipping,
    check_traffic,
    fault_word,
)

__all__ = ["ARGS", "check_figures_agree", "check_honeypot_rows", "check_traffic", "require_browser"]


@pytest.fixture
def live(tmp_path: Path, miner_keys: list[Any]) -> Iterator[tuple[str, uvicorn.Server]]:
    with live_service(tmp_path, miner_keys) as served:
        yield served


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
        expect(glance).to_contain_text("Rounds done2 of 2")
        expect(glance.locator(".tile.status")).to_contain_text("finished")
        expect(glance.locator(".tile").nth(2)).to_contain_text("2")  # the roster's, not commits
        # 12,000 committed; the honeypot's 3,000 of round 1, where it was caught, left out
        expect(glance).to_contain_text("Tokens merged9,000")
        expect(page.locator("#model-body")).to_contain_text("Parameters")
        expect(page.locator("#model-body")).to_contain_text("momentum 0.9")
        expect(page.locator("#islands-body .island")).to_have_count(3)
        expect(page.locator("#roster-table tbody tr")).to_have_count(3)
        shown = httpx.get(f"{base}/v1/runs/run-1/dashboard").json()["islands"]
        words = {fault_word(i) for i in shown} - {None}
        assert words == {"proven fault"}, shown  # the honeypot's round 0 is final: booked
        expect(page.locator("#roster-table")).to_contain_text("proven fault")
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
        check_utilisation(page, httpx.get(f"{base}/v1/runs/run-1/dashboard").json()["utilisation"])
        for width in (1400, 900):  # at 1400 px the rounds table fits; narrower, it scrolls
            check_no_clipping(page, width)
        page.set_viewport_size({"width": 1280, "height": 1400})
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


def check_utilisation(page: Any, u: dict[str, Any]) -> None:
    """The utilisation panel prints the service's figures: all islands, then each island,
    with a column per cause the service names."""
    from playwright.sync_api import expect

    table = page.locator("#utilisation-table")
    expect(table.locator("tbody tr")).to_have_count(1 + len(u["islands"]))
    assert u["rounds"] == 1 and u["causes"]  # round 0 is finished: round 1 opened
    for cause in u["causes"]:
        expect(table.locator("thead")).to_contain_text(f"Waiting: {cause}")
    a = u["all"]
    expect(table.locator("tr.all .wall")).to_have_text(f"{a['wall_s']:,} s")
    expect(table.locator("tr.all .busy")).to_contain_text(f"{a['busy_s']:,} s (")
    expect(table.locator("tr.all .rounds")).to_have_text(f"{a['committed']} of {a['rounds']}")
    expect(page.locator("#utilisation-body")).to_contain_text("upper bound")
