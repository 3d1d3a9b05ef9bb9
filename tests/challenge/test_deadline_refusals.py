"""The service refuses, at creation, a deadline shorter than the work it must hold, on its
own beacon's period: a dispute answer deadline under one segment's replay, and a
competition score window under the evaluator's time limit for one model."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from hypertrain.challenge.app import create_app
from hypertrain.competition.pool import encode_pool
from tests.challenge.helpers import SteppedBeacon, bearer, make_settings, manifest_doc
from tests.competition.world import MINERS, POOL, spec_doc

PROXY = {"vocab_size": 4096, "d_model": 256, "num_layers": 4, "num_heads": 4, "head_dim": 64,
         "ffn_hidden": 704, "context_length": 32}  # fmt: skip


def test_a_run_whose_answer_deadline_cannot_hold_a_replay_is_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, [k.ss58_address for k in MINERS])
    with TestClient(create_app(settings, beacon=SteppedBeacon())) as client:
        doc = manifest_doc("big")
        doc["model"] = PROXY  # 2-step segments of 20 samples: about 4 s, 12 s with margin
        doc["dispute"] = {"answer_rounds": 3}
        refused = client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert refused.status_code == 400 and refused.json()["error"] == "bad_manifest"
        detail = refused.json()["detail"]
        assert detail.startswith("manifest.dispute: dispute.answer_rounds = 3 beacon rounds")
        assert "at 3 s per round an answer needs 6 rounds" in detail and "at least 6" in detail
        doc["dispute"] = {"answer_rounds": 6}
        created = client.post("/admin/v1/runs", json={"manifest": doc}, headers=bearer("admin"))
        assert created.status_code == 200, created.text


def test_a_score_window_shorter_than_one_models_time_limit_is_refused(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, [k.ss58_address for k in MINERS])
    with TestClient(create_app(settings, beacon=SteppedBeacon())) as client:
        cycle = {"score_window_rounds": 20}  # 60 s on a 3 s beacon; the limit is 600 s
        doc = {"spec": spec_doc(cycle=cycle), "pool": encode_pool(POOL)}
        refused = client.post("/admin/v1/competitions", json=doc, headers=bearer("admin"))
        assert refused.status_code == 400 and refused.json()["error"] == "bad_spec"
        detail = refused.json()["detail"]
        assert "cycle.score_window_rounds = 20 is 60 s at 3 s per beacon round" in detail
        assert "shorter than the 600 s" in detail and "at least 200" in detail
        cycle["model_time_limit_s"] = 60  # a window that holds the limit is accepted
        doc = {"spec": spec_doc(cycle=cycle), "pool": encode_pool(POOL)}
        created = client.post("/admin/v1/competitions", json=doc, headers=bearer("admin"))
        assert created.status_code == 200, created.text
