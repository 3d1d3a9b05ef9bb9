"""The dashboard page, its assets and its JSON view on a service driven through real rounds."""

from __future__ import annotations

from hypertrain.challenge import dashpanels
from hypertrain.challenge.dashmodels import Dashboard
from tests.challenge.conftest import Harness
from tests.challenge.dashdata import run_rounds


def test_page_and_assets_are_served_offline(harness: Harness) -> None:
    c = harness.client
    page = c.get("/dashboard/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    html = page.text
    for panel in ("glance", "model", "curve", "islands", "roster", "rounds", "audits"):
        assert f'id="{panel}"' in html
    assert "http://" not in html and "https://" not in html  # no CDN
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
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
    assert d["glance"]["heldout_loss"] is None and d["glance"]["bandwidth_saved"] is None
    assert d["model"]["parameters"] == 256 * 16 + (4 * 16 * 16 + 3 * 16 * 32 + 2 * 16) + 16


def test_view_after_two_rounds(harness: Harness) -> None:
    run_rounds(harness, rounds=2)
    d = harness.client.get("/v1/runs/run-1/dashboard").json()
    g = d["glance"]
    assert g["rounds_done"] == 2 and g["heldout_loss"] == 4.0 and g["first_heldout_loss"] == 4.5
    assert g["tokens"] == 2 * 6000 and g["faults"] == 1 and g["audits"] >= 3
    assert g["status"] == "between rounds"
    assert [p["heldout_loss"] for p in d["curve"]] == [4.5, 4.0]
    first = d["rounds"][0]
    per_step = d["model"]["parameters"] * 4
    assert first["ddp_bytes"] == 3 * 8 * per_step and first["bytes_sent"] == 3 * 4096
    assert first["saved_factor"] == first["ddp_bytes"] / first["bytes_sent"]
    assert first["compute_s"] is not None and first["sync_s"] is not None
    # honest traffic: commits, updates, audited checkpoints and model downloads all count
    moved = first["traffic"]
    assert moved["updates"] == 3 * 4096 and moved["commits"] > 0
    assert moved["model_download"] == 3 * per_step and moved["checkpoints"] > 0
    params = d["model"]["parameters"]
    assert first["ddp_ring_bytes"] == 3 * ((2 * 2 * 2 * params * 8) // 3)  # 2(n-1)/n, n=3, H=8
    assert first["honest_saved_factor"] == first["ddp_ring_bytes"] / sum(moved.values())
    assert g["honest"]["honest_bytes"] == sum(r["honest_bytes"] for r in d["rounds"])
    assert "2(n-1)/n" in g["honest"]["ddp_formula"]
    shares = [i["share"] for i in d["islands"]]
    assert abs(sum(shares) - 1) < 1e-9 and len(set(shares)) == 3
    caught = [a for a in d["audits"] if a["fault"]]
    assert len(caught) == 1 and caught[0]["round"] == 0
    assert caught[0]["beacon_round"] == 101 and len(caught[0]["beacon_randomness"]) == 64
    assert caught[0]["verdicts"][0]["first_bad_leaf"] == 2
    statuses = {i["hotkey"]: i["status"] for i in d["islands"]}
    assert statuses[caught[0]["hotkey"]] == "faulted"


def test_document_is_the_typed_contract_with_traffic_honeypots_and_disputes(
    harness: Harness,
) -> None:
    run_rounds(harness, rounds=2)
    d = harness.client.get("/v1/runs/run-1/dashboard").json()
    doc = Dashboard.model_validate(d)  # the route's response model, field for field
    assert set(d) == set(Dashboard.model_fields)
    # the traffic panel carries the run totals the glance tile is computed from
    honest = d["glance"]["honest"]
    assert doc.traffic.honest_bytes == honest["honest_bytes"] > 0
    assert doc.traffic.ddp_ring_bytes == honest["ddp_ring_bytes"] > 0
    assert doc.traffic.ratio == honest["honest_bytes"] / honest["ddp_ring_bytes"]
    assert doc.traffic.parts == honest["traffic"]
    # no honeypot list committed and no dispute opened: explicit, empty panels
    assert (doc.honeypots.committed, doc.honeypots.revealed, doc.honeypots.rows) == (
        False,
        False,
        [],
    )
    assert doc.disputes == []
    schema = harness.client.get("/openapi.json").json()
    route = schema["paths"]["/v1/runs/{run_id}/dashboard"]["get"]["responses"]["200"]
    assert route["content"]["application/json"]["schema"]["$ref"].endswith("/Dashboard")


def test_narrowing_lines_become_typed_steps() -> None:
    lines = [
        "opened at beacon 7: segment 1, steps (0, 4]",
        "beacon 8: agree after step 1, differ after step 2",
        "beacon 9: step 1 first differs in mb0.layers.0",
        "beacon 9: mb0.layers.0 operation 3 (aten.mm.default) contested",
        "beacon 20: no ruling yet, referee deadline extended",
        "overturned: referee 5F recomputed aten.mm.default: island is right",
    ]
    steps = [dashpanels._narrowing(line) for line in lines]
    assert [s["level"] for s in steps] == ["open", "step", "layer", "op", "referee", "decided"]
    assert [s["beacon_round"] for s in steps] == [7, 8, 9, 9, 20, None]
    assert steps[1]["text"] == "agree after step 1, differ after step 2"
