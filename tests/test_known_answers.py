"""Frozen known-answer vectors: the byte formats still produce the recorded answers.

The two-process determinism tests compare the code with itself; these compare it with
answers frozen in tests/assets/vectors/, so a change to a byte layout that deployed
miners, auditors or aggregators depend on fails here until the vector is regenerated
(``python scripts/freeze_vectors.py``) and the change is recorded in docs/protocol.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.known_answers import PROFILE, RECIPES, VECTORS_DIR, compute_all


@pytest.fixture(scope="module")
def computed() -> dict[str, Any]:
    return compute_all()


def test_the_pinned_profile_was_applied(computed: dict[str, Any]) -> None:
    assert computed["_profile"]["aten_cpu_capability"] == PROFILE["ATEN_CPU_CAPABILITY"].upper()


def test_every_recipe_has_a_frozen_vector() -> None:
    assert sorted(p.stem for p in VECTORS_DIR.glob("*.json")) == sorted(RECIPES)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_vector(name: str, computed: dict[str, Any]) -> None:
    frozen = json.loads((VECTORS_DIR / f"{name}.json").read_text(encoding="utf-8"))
    assert frozen["vector"] == name and frozen["profile"] == PROFILE
    assert computed[name] == frozen["answer"], (
        f"the {name} vector changed: if the format change is intended, run "
        "`python scripts/freeze_vectors.py` and add a changelog line to docs/protocol.md"
    )
