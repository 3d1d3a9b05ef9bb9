"""Checks of the dashboard page in Chromium against the JSON document it draws.

Shared by the live-service tests here and the devnet's end-to-end test, which runs them
on a real devnet's final document: one figure, one value, across every panel.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx


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
    expect(sync).to_contain_text(f"Outer: {m['outer']['words']}")
    expect(page.locator("#model-body")).to_contain_text(m["outer"]["words"])
    plain = m["outer"]["lr"] == 1 and m["outer"]["momentum"] == 0  # the devnet's outer step
    assert m["outer"]["words"].startswith("plain averaging") == plain, m["outer"]

    cs = doc["curve_summary"]
    summary = page.locator("#curve-summary")
    expect(summary).to_contain_text(f"{cs['lowest']['loss']:.4f} · r{cs['lowest']['round']}")
    expect(summary).to_contain_text(f"Started at{cs['start']['loss']:.4f}")
    expect(summary).to_contain_text("Largest spike" + ("none" if cs["spike"] is None else ""))

    cards = page.locator("#islands-body .island")
    for n, isl in enumerate(doc["islands"]):
        card = cards.nth(n)
        expect(card.locator("h3")).to_contain_text(isl["name"])
        expect(card.locator(".region")).to_have_text(isl["region"] or "not reported")
        tokens = card.locator(".tokens")
        expect(tokens).to_contain_text(f"{isl['tokens_merged']:,}")
        if isl["tokens_merged"] != isl["tokens"]:
            expect(tokens).to_contain_text(f"of {isl['tokens']:,} committed")
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
    done = f"Rounds done{len(merged)} of {g['rounds_total']}"  # the one figure, in both places
    expect(tiles).to_contain_text(done)
    if doc["curve_summary"] is not None:
        expect(page.locator("#curve-summary")).to_contain_text(done)
    check_tokens_agree(page, doc)
    check_labels_and_times(page, doc)
    taking_part = [i for i in doc["islands"] if i["status"] in ("active", "probation")]
    assert g["islands"] == len(taking_part)
    expect(tiles).to_contain_text(f"Islands taking part{len(taking_part)}")
    expect(page.locator("#islands-body .island")).to_have_count(len(doc["islands"]))
    expect(page.locator("#rounds-table tbody tr")).to_have_count(min(len(doc["rounds"]), 12))
    expect(tiles).to_contain_text(f"Run status{g['status']}")
    expect(page.locator("header nav a[href='mine.html']")).to_have_text("How to mine")


def check_tokens_agree(page: Any, doc: dict[str, Any]) -> None:
    """Tokens, throughput and shares count the same tokens: those merges included."""
    from playwright.sync_api import expect

    g, islands = doc["glance"], doc["islands"]
    assert g["tokens"] == sum(i["tokens_merged"] for i in islands), (g, islands)
    taking_part = [i for i in islands if i["status"] in ("active", "probation")]
    assert g["tokens_per_s"] == sum(i["tokens_per_s"] or 0 for i in taking_part)
    if g["tokens"]:
        assert abs(sum(i["share"] for i in islands) - 1) < 1e-9
    expect(page.locator("#glance-tiles")).to_contain_text(f"Tokens merged{g['tokens']:,}")


def fault_word(isl: dict[str, Any]) -> str | None:
    """The dashboard's word for an island's faults: proven beats accused (``app.js``)."""
    if isl["proven_faults"] > 0:
        return "proven fault"
    return "accused" if isl["accused_rounds"] > 0 else None


def check_labels_and_times(page: Any, doc: dict[str, Any]) -> None:
    """An island with a proven fault is labelled "proven fault", one only accused (a
    standing fault verdict, still disputable) "accused", never "probation"; every time
    says UTC."""
    from playwright.sync_api import expect

    islands = {i["hotkey"]: i for i in doc["islands"]}
    shown = doc["audits"][:8]  # the table's rows, newest first
    for n, audit in enumerate(shown):
        cell = page.locator("#audits-table tbody tr").nth(n).locator("td.who")
        isl = islands.get(audit["hotkey"])
        word = fault_word(isl) if isl else None
        if word:
            expect(cell).to_contain_text(f"({word})")
            expect(cell).not_to_contain_text("probation")
    stamp = re.compile(r"^\d\d:\d\d:\d\d UTC$")
    newest = doc["rounds"][-1]
    started = page.locator("#rounds-table tbody tr").first.locator("td").nth(1)
    want = time.strftime("%H:%M:%S UTC", time.gmtime(newest["started_unix"]))
    expect(started).to_have_text(want)
    assert stamp.match(want)
    expect(page.locator("#updated")).to_have_text(re.compile(r"\d\d:\d\d:\d\d UTC\.$"))
    for isl in doc["islands"]:
        if isl["last_sync_unix"] is not None:
            when = time.strftime("%H:%M:%S UTC", time.gmtime(isl["last_sync_unix"]))
            card = page.locator("#islands-body .island", has_text=isl["name"]).first
            expect(card.locator(".sync")).to_contain_text(when)


def check_no_clipping(page: Any, width: int) -> None:
    """At ``width`` px every table fits its panel or scrolls inside it; nothing is cut off
    and the page itself never scrolls sideways. From 1400 px the rounds table fits."""
    page.set_viewport_size({"width": width, "height": 1400})
    clipped = page.evaluate(
        """() => [...document.querySelectorAll("main table")].filter((t) => t.offsetWidth)
          .map((t) => {
            const panel = t.closest(".panel").getBoundingClientRect();
            const r = t.getBoundingClientRect(), box = t.closest(".scroll");
            const scrolls = box !== null
              && ["auto", "scroll"].includes(getComputedStyle(box).overflowX)
              && box.scrollWidth >= t.offsetWidth
              && box.getBoundingClientRect().right <= panel.right + 0.5;
            const fits = r.left >= panel.left - 0.5 && r.right <= panel.right + 0.5;
            return { id: t.id, fits, scrolls };
          }).filter((x) => !x.fits && !x.scrolls)"""
    )
    assert clipped == [], (width, clipped)
    if width >= 1400:
        spill = page.evaluate(
            """() => document.querySelector("#rounds-table").getBoundingClientRect().right
              - document.querySelector("#rounds .scroll").getBoundingClientRect().right"""
        )
        assert spill <= 0.5, f"the rounds table spills {spill} px past its panel at {width} px"
    wide = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 0, f"the page scrolls sideways by {wide} px"


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
    # honest in round 0, caught in round 1, the one round it cheated: 100 %, not 1 of 2
    assert (cheat["rounds_run"], cheat["rounds_cheated"], cheat["caught_cheating"]) == (2, 1, 1)
    assert cheat["catch_rate"] == 1.0 and not cheat["every_round_assumed"]
    check_traffic(page, doc["traffic"])


def check_honeypot_rows(page: Any, hp: dict[str, Any]) -> None:
    """A revealed honeypot list fills the panel: one row per role and strategy, its rates."""
    from playwright.sync_api import expect

    assert hp["revealed"] and hp["rows"]
    expect(page.locator("#honeypots-table tbody tr")).to_have_count(len(hp["rows"]))
    expect(page.locator("#honeypots-body .rate-def")).to_contain_text(
        "Catch rate: the rounds a cheat was caught in, of the rounds it cheated"
    )
    for r in hp["rows"]:
        line = page.locator(f"#honeypots-table tr[data-strategy='{r['role']}:{r['strategy']}']")
        if r["role"] == "island" and r["strategy"] != "honest":  # caught / cheated rounds
            cheated = r["rounds_cheated"]
            assert r["catch_rate"] == (r["caught_cheating"] / cheated if cheated else None), r
            mark = " *" if r["every_round_assumed"] else ""
            expect(line.locator(".cheated")).to_have_text(
                f"{r['caught_cheating']} of {cheated}{mark}"
            )
        for cls, rate in ((".catch", r["catch_rate"]), (".fp", r["false_positive_rate"])):
            want = "—" if rate is None else f"{100 * rate:.1f} %".replace(".0 %", " %")
            expect(line.locator(cls)).to_have_text(want)


def check_traffic(page: Any, t: dict[str, Any]) -> None:
    """One traffic figure: the tile leads with the all-in words and the panel prints the
    service's words for every row."""
    from playwright.sync_api import expect

    assert t["all"]["ratio"] is not None and t["all"]["ratio"] > 0
    expect(page.locator("#traffic-table tr.all .ratio")).to_have_text(t["all"]["words"])
    head = t["all_in"]
    expect(page.locator("#traffic-table tr.all-in .ratio")).to_have_text(head["words"])
    tile = page.locator("#glance-tiles .tile", has_text="Traffic vs data-parallel")
    expect(tile.locator("dd")).to_contain_text(f"{head['words']} all-in")
    if t["steady"]["rounds"]:
        expect(tile).to_contain_text(t["steady"]["words"])
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
    reveal = real["honeypots"]["reveal_round"]
    expect(page.locator("#honeypots-body")).to_contain_text(f"round {reveal} is final")
    expect(page.locator("#traffic-body")).to_contain_text("No round has moved any bytes yet.")
    page.close()
