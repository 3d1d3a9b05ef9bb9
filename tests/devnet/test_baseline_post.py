"""The baseline thread posts its curve to the service after each round it trains, with the
admin token; a post that fails is recorded in the thread's ``error``, never raised."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import cast

import httpx

from hypertrain.api.client import ChallengeClient
from hypertrain.data.dataset import Dataset
from hypertrain.devnet.baseline import BaselineStore, BaselineThread
from hypertrain.protocol.manifest import RunManifest
from tests.challenge.helpers import manifest_doc

URL = "http://service"


def _thread(tmp_path: Path, token: str | None) -> BaselineThread:
    manifest = RunManifest.model_validate(manifest_doc())
    store = BaselineStore(tmp_path / "baseline", manifest)
    # posting reads no data: the dataset is never touched here
    return BaselineThread(URL, manifest, cast(Dataset, None), store, admin_token=token)


def _service(status: int, sent: list[httpx.Request], token: str = "admin") -> ChallengeClient:
    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if status != 200:
            return httpx.Response(status, json={"error": "unauthorized", "detail": "wrong token"})
        body = json.loads(request.content)
        return httpx.Response(200, json={**body, "run_id": "run-1", "updated_beacon_round": 9})

    return ChallengeClient(URL, admin_token=token, transport=httpx.MockTransport(answer))


def test_each_new_round_posts_the_whole_curve_once(tmp_path: Path) -> None:
    thread, sent = _thread(tmp_path, "admin"), list[httpx.Request]()
    service = _service(200, sent)
    thread.publish(service, [4.4])
    thread.publish(service, [4.4])  # no round trained since: nothing to post
    thread.publish(service, [4.4, 3.9])
    assert [(r.method, r.url.path) for r in sent] == [("PUT", "/admin/v1/runs/run-1/baseline")] * 2
    assert sent[0].headers["authorization"] == "Bearer admin"
    last = json.loads(sent[1].content)
    assert last == {"label": "data-parallel on the same tokens", "heldout_loss": [4.4, 3.9]}
    assert thread.error is None and thread.posted == 2


def test_a_refused_post_is_recorded_not_raised(tmp_path: Path) -> None:
    thread, sent = _thread(tmp_path, "admin"), list[httpx.Request]()
    thread.publish(_service(401, sent), [4.4])
    assert thread.error is not None and "posting the baseline curve" in thread.error
    assert "401" in thread.error and len(sent) == 1
    thread.publish(_service(200, sent), [4.4, 3.9])  # tried again, whole, after a round
    assert json.loads(sent[-1].content)["heldout_loss"] == [4.4, 3.9]


def test_a_non_finite_loss_is_recorded_and_nothing_sent(tmp_path: Path) -> None:
    thread, sent = _thread(tmp_path, "admin"), list[httpx.Request]()
    thread.publish(_service(200, sent), [4.4, math.nan])
    assert thread.error is not None and "finite" in thread.error and sent == []


def test_without_an_admin_token_nothing_is_posted(tmp_path: Path) -> None:
    thread, sent = _thread(tmp_path, None), list[httpx.Request]()
    thread.publish(_service(200, sent), [4.4])
    assert sent == [] and thread.error is None
