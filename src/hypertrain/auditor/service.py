"""A small HTTP client for the challenge service (public, miner and worker routes)."""

from __future__ import annotations

from typing import Any

import httpx

from hypertrain.auditor.errors import ServiceError
from hypertrain.protocol.envelope import Envelope


class ServiceClient:
    """Talks JSON to one challenge service; ``worker_token`` unlocks the worker routes."""

    def __init__(
        self,
        base_url: str,
        *,
        worker_token: str | None = None,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        """``http`` injects a ready client (e.g. a test client bound to the app)."""
        self.base_url = base_url.rstrip("/")
        self._worker_token = worker_token
        self._http = http or httpx.Client(
            base_url=self.base_url, timeout=timeout_s, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, path: str, *, worker: bool = False) -> Any:
        try:
            resp = self._http.get(path, headers=self._headers(worker))
        except httpx.HTTPError as exc:
            raise ServiceError(f"GET {path} failed: {exc}") from exc
        return _json_or_raise(resp, f"GET {path}")

    def _post(self, path: str, envelope: Envelope, *, worker: bool = False) -> dict[str, Any]:
        try:
            resp = self._http.post(path, json=envelope.model_dump(), headers=self._headers(worker))
        except httpx.HTTPError as exc:
            raise ServiceError(f"POST {path} failed: {exc}") from exc
        result: dict[str, Any] = _json_or_raise(resp, f"POST {path}")
        return result

    def _headers(self, worker: bool) -> dict[str, str]:
        if not worker:
            return {}
        if not self._worker_token:
            raise ServiceError("this request needs a worker token (--worker-token-file)")
        return {"authorization": f"Bearer {self._worker_token}"}

    def beacon_round(self) -> int:
        """The latest verified beacon round the service acts on."""
        value = self._get("/v1/beacon").get("round")
        if not isinstance(value, int):
            raise ServiceError("the service has not verified any beacon round yet")
        return value

    def manifest_envelope(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._get(f"/v1/runs/{run_id}/manifest")
        return result

    def run_summary(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._get(f"/v1/runs/{run_id}")
        return result

    def rounds(self, run_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._get(f"/v1/runs/{run_id}/rounds")
        return result

    def roster(self, run_id: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._get(f"/v1/runs/{run_id}/roster")
        return result

    def round_detail(self, run_id: str, index: int) -> dict[str, Any]:
        result: dict[str, Any] = self._get(f"/v1/runs/{run_id}/rounds/{index}")
        return result

    def assignments(self, run_id: str, index: int) -> list[dict[str, Any]]:
        path = f"/worker/v1/runs/{run_id}/rounds/{index}/assignments"
        result: list[dict[str, Any]] = self._get(path, worker=True)
        return result

    def join(self, envelope: Envelope) -> dict[str, Any]:
        return self._post("/v1/join", envelope)

    def commit(self, envelope: Envelope) -> dict[str, Any]:
        return self._post("/v1/commit", envelope)

    def dispute(self, envelope: Envelope) -> dict[str, Any]:
        return self._post("/v1/dispute", envelope)

    def verdict(self, envelope: Envelope) -> dict[str, Any]:
        return self._post("/worker/v1/verdict", envelope, worker=True)


def _json_or_raise(resp: httpx.Response, what: str) -> Any:
    try:
        doc = resp.json()
    except ValueError:
        doc = None
    if resp.is_success and doc is not None:
        return doc
    detail: Any = doc.get("detail", doc) if isinstance(doc, dict) else resp.text[:300]
    code = str(doc.get("error", "")) if isinstance(doc, dict) else ""
    raise ServiceError(f"{what}: HTTP {resp.status_code}: {detail}", resp.status_code, code)
