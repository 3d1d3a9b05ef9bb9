"""Fuzz every operation of the served OpenAPI schema (schemathesis): never a 5xx
other than the contract's 503 ("cannot score yet"), and every error body says what was wrong.
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.challenge.conftest import Harness
from tests.challenge.helpers import TOKENS

EXAMPLES_PER_OPERATION = 12


def test_openapi_fuzz_has_no_server_errors(harness: Harness) -> None:
    app = harness.client.app
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)  # type: ignore[arg-type]
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    for operation in operations:
        _fuzz(operation)


def _fuzz(operation: schemathesis.APIOperation) -> None:
    token = (
        "admin"
        if operation.path.startswith("/admin")
        else ("worker" if operation.path.startswith("/worker") else "internal")
    )

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def check(case: schemathesis.Case) -> None:
        headers = {
            "Authorization": f"Bearer {TOKENS[token]}",
            "X-Platform-Challenge-Slug": "hypertrain",
        }
        response = case.call(headers=headers)
        where = f"{operation.method.upper()} {operation.path}: {response.text[:300]}"
        assert response.status_code < 500 or response.status_code == 503, where
        if response.status_code >= 400:
            assert response.json().get("detail"), where

    check()
