"""``ChallengeClient``: the one HTTP client of the challenge service (no torch).

Every role talks to the service through it: miners read rounds and post signed
join, commit and dispute envelopes; auditors read assignments and post verdicts
with the worker token; the aggregator posts merge tapes (worker token) and opens
rounds (admin token). A route that needs a token the client was not given fails
before anything is sent. Every refusal, transport failure or unusable answer is a
:class:`~hypertrain.api.errors.ServiceError` carrying the HTTP status and
the service's error code, so callers can treat ``duplicate`` or 404 as they need.
Answers are parsed into the service's own response models
(:mod:`hypertrain.api.models`); an answer that does not fit is a ``ServiceError``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import httpx
from pydantic import JsonValue, TypeAdapter, ValidationError

from hypertrain.api.baseline import BaselineIn, BaselinePublic
from hypertrain.api.disputes import DisputeAnswered, DisputeOpened, DisputeRuled, ReassignedAudit
from hypertrain.api.errors import ServiceError
from hypertrain.api.models import (
    AdmissionAnswerAck,
    AdmissionStatus,
    AttestationAnswer,
    BeaconPublic,
    CommitAnswer,
    CorrectionAnswer,
    JoinAnswer,
    LeaveAnswer,
    MergeAnswer,
    PendingAdmission,
    ProvenFault,
    RosterEntry,
    RoundDetail,
    RoundSummary,
    RunListItem,
    RunSummary,
    VerdictAnswer,
    VersionAnswer,
    WeightsPublic,
)
from hypertrain.dispute.view import DisputeView
from hypertrain.protocol.envelope import Envelope, open_envelope
from hypertrain.protocol.errors import EnvelopeError
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import ManifestRecord

Role = Literal["", "worker", "admin", "internal"]
T = TypeVar("T")
_ROUNDS = TypeAdapter(list[RoundSummary])
_ROSTER = TypeAdapter(list[RosterEntry])
_ENVELOPES = TypeAdapter(list[Envelope])
_PENDING = TypeAdapter(list[PendingAdmission])
_DISPUTES = TypeAdapter(list[DisputeView])
_DOCUMENT = TypeAdapter(dict[str, JsonValue])


class ChallengeClient:
    """Talks JSON to one challenge service; the tokens unlock the worker and admin routes."""

    def __init__(
        self,
        base_url: str,
        *,
        worker_token: str | None = None,
        admin_token: str | None = None,
        internal_token: str | None = None,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        """``http`` injects a ready client (e.g. a test client bound to the app)."""
        self.base_url = base_url.rstrip("/")
        self._tokens: dict[Role, str | None] = {
            "worker": worker_token,
            "admin": admin_token,
            "internal": internal_token,
        }
        self._http = http or httpx.Client(timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ChallengeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        role: Role = "",
        headers: dict[str, str] | None = None,
    ) -> Any:
        """One request; ``role`` names the bearer token the route needs ("" for none)."""
        headers = dict(headers or {})
        if role:
            token = self._tokens[role]
            if not token:
                what = f"{method} {path} needs the {role} token"
                raise ServiceError(f"{what} (--{role}-token-file)")
            headers["authorization"] = f"Bearer {token}"
        if isinstance(body, Envelope):
            body = body.model_dump()
        try:
            resp = self._http.request(method, self.base_url + path, json=body, headers=headers)
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise ServiceError(
                f"cannot reach the challenge service at {self.base_url} ({method} {path}): {reason}"
            ) from exc
        return _json_or_raise(resp, f"{method} {path}")

    def _get(self, adapter: TypeAdapter[T], path: str, *, role: Role = "") -> T:
        return _parse(adapter, self._call("GET", path, role=role), f"GET {path}")

    # public reads

    def beacon_round(self) -> int:
        """The latest verified beacon round the service acts on."""
        value = self._get(TypeAdapter(BeaconPublic), "/v1/beacon").round
        if value is None:
            raise ServiceError("the service has not verified any beacon round yet")
        return value

    def manifest_envelope(self, run_id: str) -> dict[str, JsonValue]:
        """The signed manifest envelope as served (callers verify it themselves)."""
        return self._get(_DOCUMENT, f"/v1/runs/{run_id}/manifest")

    def manifest(self, run_id: str) -> RunManifest:
        """The run manifest, verified: signed for this run by the coordinator it names."""
        raw = self.manifest_envelope(run_id)
        try:
            env = open_envelope(raw, domain="manifest", run_id=run_id)
            manifest = ManifestRecord.model_validate(env.body).manifest
        except (EnvelopeError, ValidationError) as exc:
            raise ServiceError(f"the manifest of {run_id} does not verify: {exc}") from None
        if manifest.coordinator and manifest.coordinator != env.signer:
            raise ServiceError("the manifest is not signed by the coordinator it names")
        return manifest

    def version(self) -> VersionAnswer:
        """The Cortex ``/version`` answer: the challenge's slug, version and contract."""
        return self._get(TypeAdapter(VersionAnswer), "/version")

    def runs(self) -> list[RunListItem]:
        """Every run the service holds, oldest first."""
        return self._get(TypeAdapter(list[RunListItem]), "/v1/runs")

    def run_summary(self, run_id: str) -> RunSummary:
        return self._get(TypeAdapter(RunSummary), f"/v1/runs/{run_id}")

    def rounds(self, run_id: str) -> list[RoundSummary]:
        return self._get(_ROUNDS, f"/v1/runs/{run_id}/rounds")

    def roster(self, run_id: str) -> list[RosterEntry]:
        return self._get(_ROSTER, f"/v1/runs/{run_id}/roster")

    def round_detail(self, run_id: str, index: int) -> RoundDetail:
        return self._get(TypeAdapter(RoundDetail), f"/v1/runs/{run_id}/rounds/{index}")

    def proven_faults(self, run_id: str) -> list[ProvenFault]:
        """The run's proven faults, each with whether a rollback of it is due."""
        return self._get(TypeAdapter(list[ProvenFault]), f"/v1/runs/{run_id}/faults")

    # the platform's read (internal token and the challenge's slug)

    def get_weights(self, epoch: int, slug: str) -> WeightsPublic:
        """The weights answer for ``epoch`` (the first answer, repeated byte for byte)."""
        path = f"/internal/v1/get_weights?epoch={epoch}"
        doc = self._call("GET", path, role="internal", headers={"x-platform-challenge-slug": slug})
        return _parse(TypeAdapter(WeightsPublic), doc, f"GET {path}")

    def latest_weights(self) -> WeightsPublic | None:
        """The newest epoch's weights answer (public), or None before the first epoch."""
        try:
            return self._get(TypeAdapter(WeightsPublic), "/v1/weights/latest")
        except ServiceError as exc:
            if exc.code == "no_weights":
                return None
            raise

    # miner posts (the signed envelope is the authentication)

    def join(self, envelope: Envelope) -> JoinAnswer:
        return self._post(JoinAnswer, "/v1/join", envelope)

    def leave(self, envelope: Envelope) -> LeaveAnswer:
        return self._post(LeaveAnswer, "/v1/leave", envelope)

    def commit(self, envelope: Envelope) -> CommitAnswer:
        return self._post(CommitAnswer, "/v1/commit", envelope)

    # worker routes (auditors, aggregator)

    def assignments(self, run_id: str, index: int) -> list[Envelope]:
        path = f"/worker/v1/runs/{run_id}/rounds/{index}/assignments"
        return self._get(_ENVELOPES, path, role="worker")

    def verdict(self, envelope: Envelope) -> VerdictAnswer:
        return self._post(VerdictAnswer, "/worker/v1/verdict", envelope, role="worker")

    def post_merge(self, envelope: Envelope) -> MergeAnswer:
        return self._post(MergeAnswer, "/worker/v1/merge", envelope, role="worker")

    def post_correction(self, envelope: Envelope) -> CorrectionAnswer:
        """A signed ``merge-correction`` (a rollback's corrected tape for one round)."""
        return self._post(CorrectionAnswer, "/worker/v1/merge-correction", envelope, role="worker")

    def post_attestation(self, envelope: Envelope) -> AttestationAnswer:
        """A witness's signed ``tape-attestation`` on a round's current tape."""
        return self._post(AttestationAnswer, "/v1/tape-attestation", envelope)

    # admin routes (the coordinator's aggregator)

    def open_round(self, run_id: str, sha256: str | None, url: str | None) -> Envelope:
        """Open the run's next round with this start model; returns the signed record."""
        body = {"start_model_sha256": sha256, "start_model_url": url}
        path = f"/admin/v1/runs/{run_id}/rounds"
        doc = self._call("POST", path, body, role="admin")
        return _parse(TypeAdapter(Envelope), doc, f"POST {path}")

    def put_baseline(self, run_id: str, body: BaselineIn) -> BaselinePublic:
        """Publish the run's data-parallel baseline curve (informational: the dashboard
        draws it; it feeds no hash, verdict or reward); replaces the one before."""
        path = f"/admin/v1/runs/{run_id}/baseline"
        doc = self._call("PUT", path, body.model_dump(mode="json"), role="admin")
        return _parse(TypeAdapter(BaselinePublic), doc, f"PUT {path}")

    # admission challenge (miner: status and answer; worker: pending and check)

    def admission_status(self, run_id: str, hotkey: str) -> AdmissionStatus:
        return self._get(TypeAdapter(AdmissionStatus), f"/v1/runs/{run_id}/admission/{hotkey}")

    def admission_answer(self, envelope: Envelope) -> AdmissionAnswerAck:
        return self._post(AdmissionAnswerAck, "/v1/admission/answer", envelope)

    def admissions(self, run_id: str) -> list[PendingAdmission]:
        path = f"/worker/v1/runs/{run_id}/admissions"
        return self._get(_PENDING, path, role="worker")

    def admission_check(self, envelope: Envelope) -> JoinAnswer:
        return self._post(JoinAnswer, "/worker/v1/admission/check", envelope, role="worker")

    # disputes (the envelope authenticates; operation inputs are checked by their hashes)

    def open_dispute(self, envelope: Envelope) -> DisputeOpened:
        return self._post(DisputeOpened, "/v1/disputes", envelope)

    def disputes(
        self, run_id: str, index: int | None = None, stage: str | None = None
    ) -> list[DisputeView]:
        query = {"run_id": run_id, "round": index, "stage": stage}
        params = "&".join(f"{k}={v}" for k, v in query.items() if v is not None)
        return self._get(_DISPUTES, f"/v1/disputes?{params}")

    def reassigned(self, run_id: str) -> list[ReassignedAudit]:
        """Audits whose verdict stopped counting (a faulty auditor's), awaiting another."""
        return self._get(TypeAdapter(list[ReassignedAudit]), f"/v1/runs/{run_id}/reassigned")

    def get_dispute(self, dispute_id: str) -> DisputeView:
        return self._get(TypeAdapter(DisputeView), f"/v1/disputes/{dispute_id}")

    def dispute_answer(self, dispute_id: str, envelope: Envelope) -> DisputeAnswered:
        return self._post(DisputeAnswered, f"/v1/disputes/{dispute_id}/answer", envelope)

    def dispute_ruling(self, dispute_id: str, envelope: Envelope) -> DisputeRuled:
        return self._post(DisputeRuled, f"/v1/disputes/{dispute_id}/ruling", envelope)

    def put_dispute_inputs(self, dispute_id: str, data: bytes) -> DisputeView:
        path = f"/v1/disputes/{dispute_id}/inputs"
        try:
            resp = self._http.put(self.base_url + path, content=data)
        except httpx.HTTPError as exc:
            raise ServiceError(f"PUT {path} failed: {exc}") from exc
        return _parse(TypeAdapter(DisputeView), _json_or_raise(resp, f"PUT {path}"), f"PUT {path}")

    def dispute_inputs(self, dispute_id: str) -> bytes:
        path = f"/v1/disputes/{dispute_id}/inputs"
        try:
            resp = self._http.get(self.base_url + path)
        except httpx.HTTPError as exc:
            raise ServiceError(f"GET {path} failed: {exc}") from exc
        if not resp.is_success:
            _json_or_raise(resp, f"GET {path}")
        return resp.content

    def _post(self, model: type[T], path: str, envelope: Envelope, *, role: Role = "") -> T:
        doc = self._call("POST", path, envelope, role=role)
        return _parse(TypeAdapter(model), doc, f"POST {path}")


def _parse(adapter: TypeAdapter[T], doc: Any, what: str) -> T:
    """Validate an answer against its response model; a misfit is a ``ServiceError``."""
    try:
        return adapter.validate_python(doc)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise ServiceError(f"{what}: unexpected answer at {where}: {first['msg']}") from None


def _json_or_raise(resp: httpx.Response, what: str) -> Any:
    try:
        doc = resp.json()
    except ValueError:
        doc = None
    if resp.is_success and doc is not None:
        return doc
    detail: Any = (
        doc.get("detail", doc)
        if isinstance(doc, dict)
        # not JSON (a proxy, another service): its start on one line
        else "not JSON: " + " ".join(resp.text[:200].split())
    )
    code = str(doc.get("error", "")) if isinstance(doc, dict) else ""
    raise ServiceError(f"{what}: HTTP {resp.status_code}: {detail}", resp.status_code, code)
