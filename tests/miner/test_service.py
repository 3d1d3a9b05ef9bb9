"""The miner's service client against the real challenge app: verified records, refusals.

An expired or replayed envelope, and a manifest whose signature fails, are refused
with a clear error; the refused message changes nothing already stored.
"""

from __future__ import annotations

import pytest

from hypertrain.api.client import ChallengeClient
from hypertrain.api.errors import ServiceError
from hypertrain.evidence.errors import VerificationError
from hypertrain.evidence.verify import verify_manifest, verify_round_open
from hypertrain.miner.context import RunContext
from hypertrain.miner.run import _post_commit
from hypertrain.protocol.envelope import seal
from hypertrain.protocol.messages import Commit
from tests.challenge.conftest import Harness, harness, miner_keys  # noqa: F401
from tests.challenge.helpers import bearer, commit_body, join_body


def _client(h: Harness) -> ChallengeClient:
    return ChallengeClient("http://testserver", worker_token="w" * 32, http=h.client)


def _open_round(h: Harness) -> None:
    for key in h.miners[:2]:
        env = seal(key, domain="join", run_id="run-1", body=join_body(), expiry_round=50_000)
        assert _client(h).join(env).admitted
    r = h.client.post(
        "/admin/v1/runs/run-1/rounds",
        headers=bearer("admin"),
        json={"start_model_sha256": "aa" * 32, "start_model_url": "http://r/m"},
    )
    assert r.status_code == 200, r.text


def test_records_verify_against_the_service_coordinator(harness: Harness) -> None:  # noqa: F811
    _open_round(harness)
    client = _client(harness)
    coordinator = harness.state.coordinator
    manifest = verify_manifest(client.manifest_envelope("run-1"), "run-1", coordinator)
    record = verify_round_open(client.round_detail("run-1", 0).open, manifest, 0)
    assert record.roster == sorted(k.ss58_address for k in harness.miners[:2])
    with pytest.raises(VerificationError, match="signed by"):
        verify_manifest(client.manifest_envelope("run-1"), "run-1", harness.miners[0].ss58_address)
    assert client.beacon_round() == harness.beacon.round
    with pytest.raises(ServiceError) as exc:
        client.round_detail("run-1", 5)
    assert exc.value.status == 404


def test_expired_and_replayed_envelopes_are_refused(harness: Harness) -> None:  # noqa: F811
    _open_round(harness)
    client, key = _client(harness), harness.miners[0]
    expired = seal(
        key,
        domain="commit",
        run_id="run-1",
        body=commit_body(0),
        expiry_round=harness.beacon.round - 1,
    )
    with pytest.raises(ServiceError, match="expired") as exc:
        client.commit(expired)
    assert exc.value.status in (400, 401, 403)
    assert client.round_detail("run-1", 0).commits == []
    good = seal(key, domain="commit", run_id="run-1", body=commit_body(0), expiry_round=50_000)
    assert client.commit(good).accepted
    with pytest.raises(ServiceError) as exc:
        client.commit(good)  # the very same envelope again
    assert exc.value.status in (400, 401, 409)
    assert len(client.round_detail("run-1", 0).commits) == 1
    # the miner treats "already committed" as done (a restarted miner re-sends its commit)
    ctx = RunContext(
        None, client, verify_manifest(client.manifest_envelope("run-1"), "run-1", None)
    )  # type: ignore[arg-type]
    again = _post_commit(ctx, key, Commit.model_validate(commit_body(0)), 50_000)
    assert again is None  # already held by the service


def test_worker_routes_need_the_token(harness: Harness) -> None:  # noqa: F811
    _open_round(harness)
    anonymous = ChallengeClient("http://testserver", http=harness.client)
    with pytest.raises(ServiceError, match="worker token"):
        anonymous.assignments("run-1", 0)
    wrong = ChallengeClient("http://testserver", worker_token="x" * 32, http=harness.client)
    with pytest.raises(ServiceError) as exc:
        wrong.assignments("run-1", 0)
    assert exc.value.status in (401, 403)


def test_a_late_commit_becomes_a_skippable_miner_error(harness: Harness) -> None:  # noqa: F811
    from hypertrain.miner.errors import MinerError

    _open_round(harness)
    client, key = _client(harness), harness.miners[0]
    manifest = verify_manifest(client.manifest_envelope("run-1"), "run-1", None)
    harness.tick(manifest.round.commit_window_rounds + 1)
    ctx = RunContext(None, client, manifest)  # type: ignore[arg-type]
    with pytest.raises(MinerError, match="commit deadline passed"):
        _post_commit(ctx, key, Commit.model_validate(commit_body(0)), 50_000)
    assert client.round_detail("run-1", 0).commits == []
