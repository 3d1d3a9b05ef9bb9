"""A run without probation must name a trusted reference norm for the merge."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from hypertrain.protocol.manifest import RunManifest
from tests.aggregator.helpers import manifest


def _doc(**audit: Any) -> dict[str, Any]:
    doc = manifest().model_dump(mode="json")
    doc["audit"].update(audit)
    return doc


def test_probation_zero_without_a_trusted_reference_is_refused() -> None:
    with pytest.raises(ValidationError, match="probation_rounds = 0 leaves the merge without"):
        RunManifest.model_validate(_doc(probation_rounds=0, rate=0.1))


@pytest.mark.parametrize(
    ("audit", "outer"),
    [
        ({"probation_rounds": 1, "rate": 0.0}, {}),  # every newcomer audited
        ({"probation_rounds": 0, "rate": 1.0}, {}),  # every island audited every round
        ({"probation_rounds": 0, "rate": 0.0}, {"reference_norm": 0.5}),  # operator's norm
    ],
)
def test_a_trusted_source_admits_the_manifest(audit: dict[str, Any], outer: dict[str, Any]) -> None:
    doc = _doc(**audit)
    doc["outer"].update(outer)
    assert RunManifest.model_validate(doc).audit.probation_rounds == audit["probation_rounds"]


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_a_reference_norm_must_be_a_positive_finite_number(bad: float) -> None:
    doc = _doc()
    doc["outer"]["reference_norm"] = bad
    with pytest.raises(ValidationError):
        RunManifest.model_validate(doc)


def test_an_unset_reference_keeps_the_manifest_hash() -> None:
    m = manifest()
    assert "reference_norm" not in m.model_dump(mode="json")["outer"]
    doc = m.model_dump(mode="json")
    doc["outer"]["reference_norm"] = 0.5
    assert RunManifest.model_validate(doc).digest() != m.digest()
