"""The (world, dp, ep, zero1) part of a join's layout: checked at join, canonical at defaults."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from hypertrain.challenge.admission.rules import check_join
from hypertrain.challenge.errors import AdmissionError
from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.manifest import LayoutSpec, RunManifest, manifest_from_json
from hypertrain.protocol.messages import JoinRequest
from tests.challenge.helpers import join_body, manifest_doc

MOE = {"num_experts": 4, "top_k": 2}


def _manifest(moe: dict[str, Any] | None = MOE, max_ep: int = 2) -> RunManifest:
    doc = manifest_doc()
    if moe is not None:
        doc["model"]["moe"] = moe
    doc["round"]["layout_limits"] = {"max_dp_ranks": 4, "max_micro_batches": 4, "max_ep": max_ep}
    return manifest_from_json(doc)


def _join(devices: int, **layout: Any) -> JoinRequest:
    body = join_body(devices=devices)
    body["layout"] |= layout
    return JoinRequest.model_validate(body)


def test_an_expert_parallel_layout_within_the_limits_is_admitted() -> None:
    manifest = _manifest()
    for devices, layout in ((2, {"ep": 2}), (4, {"world": 4, "dp": 2, "ep": 2, "zero1": True})):
        assert check_join(manifest, _join(devices, **layout)) == "cpu:test"


@pytest.mark.parametrize(
    ("manifest", "devices", "layout", "message"),
    [
        (_manifest(max_ep=1), 2, {"ep": 2}, "ep=2 exceeds the limit of 1"),
        (_manifest(moe=None), 2, {"ep": 2}, "ep=2 needs a mixture-of-experts model"),
        (
            _manifest(moe={"num_experts": 6, "top_k": 2}, max_ep=4),
            4,
            {"ep": 4},
            "ep=4 does not divide 6 experts",
        ),
        (_manifest(), 2, {"world": 1, "ep": 1}, "runs 1 processes on 2 devices"),
    ],
)
def test_a_layout_the_run_cannot_take_is_refused(
    manifest: RunManifest, devices: int, layout: dict[str, Any], message: str
) -> None:
    with pytest.raises(AdmissionError, match=message) as info:
        check_join(manifest, _join(devices, **layout))
    assert info.value.code == "bad_layout"


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ({"dp_ranks": 3, "world": 2}, "2 processes cannot split 3"),
        ({"dp_ranks": 4, "ep": 3}, "ep=3 does not divide a world of 4"),
        ({"dp_ranks": 4, "world": 4, "dp": 1, "ep": 2}, "dp × ep = 1 × 2 is not the world"),
        ({"ep": 0}, "greater than or equal to 1"),
    ],
)
def test_a_layout_that_does_not_add_up_is_refused_where_it_is_parsed(
    layout: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        LayoutSpec.model_validate({"micro_batch_size": 5, **layout})


def test_defaults_keep_the_canonical_bytes_of_older_layouts_and_manifests() -> None:
    old = {"dp_ranks": 2, "micro_batches": 1, "micro_batch_size": 5}
    spec = LayoutSpec.model_validate(old)
    assert (spec.world_size, spec.expert_groups, spec.ep, spec.zero1) == (2, 2, 1, False)
    assert canonical_bytes(spec.model_dump(mode="json")) == canonical_bytes(old)
    doc = manifest_doc()
    manifest = manifest_from_json(doc)
    assert "max_ep" not in manifest.model_dump(mode="json")["round"]["layout_limits"]
    for key in (b'"ep"', b'"max_ep"', b'"world"', b'"zero1"'):
        assert key not in manifest.canonical()
    explicit = LayoutSpec.model_validate({**old, "world": 2, "dp": 2, "ep": 1, "zero1": False})
    assert canonical_bytes(explicit.model_dump(mode="json")) == canonical_bytes(
        {**old, "world": 2, "dp": 2}
    )


def test_a_dense_run_cannot_default_to_expert_parallelism() -> None:
    doc = manifest_doc()
    doc["round"]["layout"] = {"micro_batch_size": 5, "dp_ranks": 2, "ep": 2}
    doc["round"]["layout_limits"] = {"max_dp_ranks": 2, "max_micro_batches": 4, "max_ep": 2}
    with pytest.raises(ValidationError, match="needs a mixture-of-experts model"):
        manifest_from_json(doc)
