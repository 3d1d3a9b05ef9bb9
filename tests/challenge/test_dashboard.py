"""The dashboard page, its assets and its JSON view on a service driven through real rounds."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hypertrain.challenge.app import create_app
from hypertrain.challenge.dashboard import panels
from hypertrain.challenge.dashboard.document import _status
from hypertrain.challenge.dashboard.models import Dashboard
from hypertrain.challenge.dashboard.traffic import state_bytes, warm_start_bytes
from hypertrain.dispute.narrowing import NarrowStep
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.traffic import data_parallel_bytes, factor_words, ratio_words
from tests.challenge.conftest import Harness
from tests.challenge.dashdata import BROADCAST_BYTES, run_rounds
from tests.challenge.helpers import FakeLedger, SteppedBeacon, bearer, make_settings, manifest_doc


def test_page_and_assets_are_served_offline(harness: Harness) -> None:
    c = harness.client
    page = c.get("/dashboard/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    html = page.text
    for panel in ("glance", "model", "curve", "islands", "roster", "rounds", "audits"):
        assert f'id="{panel}"' in html
    assert "http://" not in html and "https://" not in html  # no CDN
    assert 'id="chart-legend"' in html and html.index("chart.js") < html.index("app.js")
    assert html.index("panels.js") < html.index("app.js")
    assets = {"app.js": "text/javascript", "chart.js": "text/javascript", "style.css": "text/css"}
    assets["panels.js"] = "text/javascript"
    for name, kind in assets.items():
        r = c.get(f"/dashboard/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(kind)
    assert "https://" not in c.get("/dashboard/app.js").text
    assert c.get("/dashboard", follow_redirects=False).status_code == 307
    assert c.get("/challenge/hypertrain/dashboard/").status_code == 200  # behind the proxy prefix


def test_unknown_asset_and_run_are_404(harness: Harness) -> None:
    c = harness.client
    assert c.get("/dashboard/secrets.txt").status_code == 404
    assert c.get("/dashboard/..%2Fapp.py").status_code == 404
    r = c.get("/v1/runs/nope/dashboard")
    assert (r.status_code, r.json()["error"]) == (404, "unknown_run")


def test_view_of_a_run_without_rounds_is_explicitly_empty(harness: Harness) -> None:
    d = harness.client.get("/v1/runs/run-1/dashboard").json()
    assert d["rounds"] == [] and d["curve"] == [] and d["islands"] == [] and d["audits"] == []
    assert d["glance"]["status"] == "waiting for the first round"
    assert d["glance"]["heldout_loss"] is None
    assert d["glance"]["traffic"]["all"]["words"] == "no such round yet"
    assert d["model"]["parameters"] == 256 * 16 + (4 * 16 * 16 + 3 * 16 * 32 + 2 * 16) + 16


def test_view_after_two_rounds(harness: Harness) -> None:
    run_rounds(harness, rounds=2)
    d = harness.client.get("/v1/runs/run-1/dashboard").json()
    g = d["glance"]
    assert g["rounds_done"] == 2 and g["heldout_loss"] == 4.0 and g["first_heldout_loss"] == 4.5
    # merged tokens only: the island caught in round 0 (3,000 a round) is out of that merge
    assert g["tokens"] == 2 * 6000 - 3000 and g["accused"] == 1 and g["audits"] >= 3
    assert g["tokens"] == sum(i["tokens_merged"] for i in d["islands"])
    assert g["status"] == "between rounds"
    assert [p["heldout_loss"] for p in d["curve"]] == [4.5, 4.0]
    first, second = d["rounds"]
    params = d["model"]["parameters"]
    assert first["bytes_sent"] == 3 * 4096 and first["compute_s"] is not None
    assert first["sync_s"] is not None
    # round 0 of a run without a warm start: every island computes the seed's start model
    # itself (miner.start_model.derived_genesis), so no island downloads it
    moved = first["traffic"]
    assert moved["updates"] == 3 * 4096 and moved["commits"] > 0 and moved["checkpoints"] > 0
    assert moved["joins"] == 0 and moved["broadcasts"] == 0
    # round 1: the same islands hold round 0's model and receive the merge's broadcast
    assert second["traffic"]["broadcasts"] == 3 * BROADCAST_BYTES
    assert second["traffic"]["joins"] == 0
    # the baseline: bf16 ring all-reduce, sent and received, n = 3, H = 8
    assert first["data_parallel_bytes"] == 2 * 3 * ((2 * 2 * 2 * params * 8) // 3)
    assert first["honest_bytes"] == sum(moved.values())
    assert first["ratio"] == first["data_parallel_bytes"] / first["honest_bytes"]
    assert first["ratio_words"] == ratio_words(first["data_parallel_bytes"], first["honest_bytes"])
    # round 0 audits its islands in probation, round 1 at the rate: the steady state
    t = g["traffic"]
    assert t["all"]["honest_bytes"] == sum(r["honest_bytes"] for r in d["rounds"])
    assert t["all"]["data_parallel_bytes"] == sum(r["data_parallel_bytes"] for r in d["rounds"])
    assert (first["probation"], second["probation"]) == (True, False)
    assert t["probation"]["rounds"] == 1 and t["steady"]["rounds"] == 1
    assert t["steady"]["words"] == second["ratio_words"]
    # the headline: every round plus the warm start (none in this manifest)
    assert t["all_in"] == {
        "rounds": 2,
        "honest_bytes": t["all"]["honest_bytes"],
        "data_parallel_bytes": t["all"]["data_parallel_bytes"],
        "warm_start_bytes": 0,
        "ratio": t["all"]["ratio"],
        "words": t["all"]["words"],
    }
    # the steady state at the audit rate: round 1's bytes but checkpoints, plus the rate's
    # share of audits of its three islands, each uploading the expected training states
    e, manifest = t["expected"], RunManifest.model_validate(manifest_doc())
    rate, per = manifest.audit.rate, e["uploads_per_audit"]
    assert e["audit_rate"] == rate and e["audits_per_round"] == pytest.approx(3 * rate)
    others = second["honest_bytes"] - second["traffic"]["checkpoints"]
    assert e["bytes_per_round"] == round(others + 3 * rate * per * state_bytes(manifest, params))
    assert e["data_parallel_bytes_per_round"] == second["data_parallel_bytes"]
    assert e["ratio"] == pytest.approx(second["data_parallel_bytes"] / e["bytes_per_round"], 1e-6)
    assert e["words"] == factor_words(e["ratio"])
    assert "2(n-1)/n" in t["formula"] and "sent and received" in t["formula"]
    shares = [i["share"] for i in d["islands"]]
    assert abs(sum(shares) - 1) < 1e-9 and len(set(shares)) == 3
    caught = [a for a in d["audits"] if a["accused"]]
    assert len(caught) == 1 and caught[0]["round"] == 0
    assert caught[0]["beacon_round"] == 101 and len(caught[0]["beacon_randomness"]) == 64
    verdict = caught[0]["verdicts"][0]
    assert verdict["first_bad_leaf"] == min(caught[0]["segments"]) + 1
    statuses = {i["hotkey"]: i["status"] for i in d["islands"]}
    assert statuses[caught[0]["hotkey"]] == "proven_fault"


def test_document_is_the_typed_contract_with_traffic_honeypots_and_disputes(
    harness: Harness,
) -> None:
    run_rounds(harness, rounds=2)
    d = harness.client.get("/v1/runs/run-1/dashboard").json()
    doc = Dashboard.model_validate(d)  # the route's response model, field for field
    assert set(d) == set(Dashboard.model_fields)
    # the tile (glance) and the panel are one value: the same summary of the same rounds
    assert doc.glance.traffic == doc.traffic
    assert (
        doc.traffic.all.ratio == doc.traffic.all.data_parallel_bytes / doc.traffic.all.honest_bytes
    )
    assert doc.traffic.all.parts["joins"] == 0  # round 0's model is the seed's: computed
    # no honeypot list committed and no dispute opened: explicit, empty panels
    assert (doc.honeypots.committed, doc.honeypots.revealed, doc.honeypots.rows) == (
        False,
        False,
        [],
    )
    assert doc.disputes == []
    assert doc.baseline is None  # no curve published (tests/challenge/test_dashboard_baseline.py)
    schema = harness.client.get("/openapi.json").json()
    route = schema["paths"]["/v1/runs/{run_id}/dashboard"]["get"]["responses"]["200"]
    assert route["content"]["application/json"]["schema"]["$ref"].endswith("/Dashboard")


def test_the_glance_agrees_with_the_panels(harness: Harness) -> None:
    """Rounds done are the merged rounds, the total is the manifest's schedule, the
    island count is the roster's (the cards), and "finished" needs no URL parameter."""
    run_rounds(harness, rounds=2)
    d = harness.client.get("/v1/runs/run-1/dashboard").json()
    g = d["glance"]
    merged = [r for r in d["rounds"] if r["phase"] in ("settle", "final")]
    assert g["rounds_done"] == len(merged) == 2
    manifest = harness.client.get("/v1/runs/run-1/manifest").json()["body"]["manifest"]
    h, total = manifest["round"]["inner_steps"], manifest["inner"]["total_steps"]
    warm = (manifest.get("warm_start") or {}).get("steps", 0)  # not rounds (the devnet's has one)
    assert g["rounds_total"] == -(-(total - warm) // h)
    taking_part = [i for i in d["islands"] if i["status"] in ("active", "probation")]
    assert g["islands"] == len(taking_part) > 0
    assert _status("final", 2, 2) == "finished"
    assert _status("settle", 2, 2).startswith("merged")
    assert _status("final", 1, 2) == "between rounds"


def test_mid_run_the_curve_and_the_glance_say_the_same_rounds_done(harness: Harness) -> None:
    """Mid-run (round 1 open, round 0 merged) one figure: rounds merged of the schedule's,
    not the rounds opened so far."""
    run_rounds(harness, rounds=1)
    r = harness.client.post("/admin/v1/runs/run-1/rounds", headers=bearer("admin"), json={})
    assert r.status_code == 200, r.text
    d = harness.client.get("/v1/runs/run-1/dashboard").json()
    g, cs = d["glance"], d["curve_summary"]
    assert len(d["rounds"]) == 2 and g["round"] == 1 and g["rounds_done"] == 1
    assert (cs["rounds_done"], cs["rounds_total"]) == (g["rounds_done"], g["rounds_total"])
    assert g["rounds_total"] != len(d["rounds"])  # the schedule's, not the rounds opened


def test_every_page_links_the_others_and_how_to_mine(harness: Harness) -> None:
    c = harness.client
    for page in ("", "competition.html", "mine.html"):
        html = c.get(f"/dashboard/{page}").text
        assert 'href="mine.html"' in html and 'href="competition.html"' in html, page
        assert 'href="./"' in html and 'href="style.css"' in html and "https://" not in html
    mine = c.get("/dashboard/mine.html").text
    assert "hypertrain-miner join" in mine and "--wallet.name" in mine and "make install" in mine


def test_narrowing_steps_render_from_their_fields() -> None:
    steps = [
        NarrowStep(level="open", beacon_round=7, actor="island", lo=0, hi=4, deadline_round=17),
        NarrowStep(level="step", beacon_round=8, actor="both", lo=1, hi=2, deadline_round=18),
        NarrowStep(level="layer", beacon_round=9, actor="both", step=1, section="mb0.layers.0"),
        NarrowStep(level="decided", beacon_round=20, actor="deadline", outcome="upheld",
                   reason="no referee ruled after 2 extensions: the verdict stands"),
    ]  # fmt: skip
    rows = [panels.narrowing_row(s).model_dump() for s in steps]
    assert [r["level"] for r in rows] == ["open", "step", "layer", "decided"]
    assert [r["beacon_round"] for r in rows] == [7, 8, 9, 20]
    assert rows[1]["text"] == "agree after step 1, differ after step 2"
    assert rows[3]["outcome"] == "upheld" and "extensions" in rows[3]["text"]


def test_carry_counts_each_audited_islands_previous_final_checkpoint(
    tmp_path: Path, miner_keys: list[Hotkey]
) -> None:
    """Under ``carry`` an audited island that committed the round before also uploads its
    final checkpoint there (``miner.checkpoints.carried_checkpoint``): the count has it,
    except for an island the round starts fresh (a proven fault before it) and one whose
    round before an auditor matched and stored (``carry_stored``)."""
    counts: dict[str, list[int]] = {}
    audited: dict[str, set[str]] = {}
    listed: dict[str, set[str]] = {}
    for policy in ("reset", "carry"):
        settings = make_settings(tmp_path / policy, [k.ss58_address for k in miner_keys])
        beacon = SteppedBeacon()
        app = create_app(settings, beacon=beacon, ledger=FakeLedger())
        with TestClient(app) as client:
            h = Harness(client, beacon, FakeLedger(), miner_keys,
                        Hotkey.from_seed(b"\x77" * 32), Hotkey.from_seed(b"\x55" * 32),
                        tmp_path / policy)  # fmt: skip
            doc = manifest_doc()
            doc["inner"] = {**doc.get("inner", {}), "state_policy": policy}
            r = client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
            assert r.status_code == 200, r.text
            run_rounds(h, rounds=2)
            d = client.get("/v1/runs/run-1/dashboard").json()
            counts[policy] = [r["traffic"]["checkpoints"] for r in d["rounds"]]
            audited[policy] = {a["hotkey"] for a in d["audits"] if a["round"] == 1}
            opened = client.get("/v1/runs/run-1/rounds/1").json()["open"]["body"]
            fresh = set(opened["fresh_start"])  # the harness's round-0 cheat
            stored = set(opened.get("carry_stored", []))  # round 0's matches
            listed[policy] = stored
            manifest = RunManifest.model_validate(doc)
            one = state_bytes(manifest, d["model"]["parameters"])
    assert audited["carry"] == audited["reset"] and audited["carry"]
    assert counts["carry"][0] == counts["reset"][0]  # round 0 starts from the public model
    # every island committed in round 0, so each one audited in round 1 uploads one more,
    # but the one round 0 caught (it starts round 1 from the public state) and those round
    # 0 matched (an auditor stored their carried state)
    assert fresh and fresh <= audited["carry"] and not fresh & stored
    assert listed["reset"] == set() and listed["carry"] == audited["carry"] - fresh
    uploading = audited["carry"] - fresh - stored
    assert counts["carry"][1] - counts["reset"][1] == len(uploading) * one


def test_the_all_in_figure_counts_the_manifests_warm_start_on_round_zeros_ring() -> None:
    doc = manifest_doc()
    plain = RunManifest.model_validate(doc)
    assert warm_start_bytes(plain, 3, 1_000) == 0
    warm = RunManifest.model_validate(
        {**doc, "warm_start": {"steps": 4, "samples_per_step": 8},
         "inner": {**doc.get("inner", {}), "total_steps": 1_000}}
    )  # fmt: skip
    assert warm_start_bytes(warm, 3, 1_000) == data_parallel_bytes(1_000, 3, 4) > 0
    assert warm_start_bytes(warm, 0, 1_000) == data_parallel_bytes(1_000, 1, 4)  # no round yet
