"""A small HTTP client for the challenge service routes the aggregator uses.

Public reads (beacon, manifest, rounds, round records) need no token; posting a
merge tape needs the worker token, opening a round the admin token. The manifest
envelope is verified before use: signed by the coordinator the manifest names.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import ValidationError

from hypertrain.aggregator.errors import ServiceError
from hypertrain.protocol.envelope import Envelope, open_envelope
from hypertrain.protocol.errors import EnvelopeError
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import ManifestRecord


class ServiceClient:
    def __init__(
        self,
        base_url: str,
        *,
        worker_token: str | None = None,
        admin_token: str | None = None,
        http: httpx.Client | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.worker_token = worker_token
        self.admin_token = admin_token
        self._http = http or httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, token: str | None = None, body: Any = None) -> Any:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        try:
            resp = self._http.request(method, self.base_url + path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ServiceError(f"{method} {path}: {exc}") from None
        if resp.status_code != 200:
            raise ServiceError(f"{method} {path}: {resp.status_code} {resp.text[:300]}")
        return resp.json()

    def beacon_round(self) -> int:
        doc = self._call("GET", "/v1/beacon")
        if doc.get("round") is None:
            raise ServiceError("the service has no verified beacon round yet")
        return int(doc["round"])

    def manifest(self, run_id: str) -> RunManifest:
        raw = self._call("GET", f"/v1/runs/{run_id}/manifest")
        try:
            env = open_envelope(raw, domain="manifest", run_id=run_id)
            manifest = ManifestRecord.model_validate(env.body).manifest
        except (EnvelopeError, ValidationError) as exc:
            raise ServiceError(f"the manifest of {run_id} does not verify: {exc}") from None
        if manifest.coordinator and manifest.coordinator != env.signer:
            raise ServiceError("the manifest is not signed by the coordinator it names")
        return manifest

    def rounds(self, run_id: str) -> list[dict[str, Any]]:
        value: list[dict[str, Any]] = self._call("GET", f"/v1/runs/{run_id}/rounds")
        return value

    def round_detail(self, run_id: str, index: int) -> dict[str, Any]:
        value: dict[str, Any] = self._call("GET", f"/v1/runs/{run_id}/rounds/{index}")
        return value

    def post_merge(self, envelope: Envelope) -> dict[str, Any]:
        if not self.worker_token:
            raise ServiceError("posting a merge tape needs the worker token")
        value: dict[str, Any] = self._call(
            "POST", "/worker/v1/merge", self.worker_token, envelope.model_dump()
        )
        return value

    def open_round(self, run_id: str, sha256: str | None, url: str | None) -> dict[str, Any]:
        if not self.admin_token:
            raise ServiceError("opening a round needs the admin token")
        body = {"start_model_sha256": sha256, "start_model_url": url}
        value: dict[str, Any] = self._call(
            "POST", f"/admin/v1/runs/{run_id}/rounds", self.admin_token, body
        )
        return value
