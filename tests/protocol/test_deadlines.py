"""The dispute answer deadline's floor: one segment's replay on the reference device of
the run's class, with margin, in beacon rounds; a manifest under it is refused."""

from __future__ import annotations

from typing import Any

import pytest

from hypertrain.protocol.deadlines import (
    ANSWER_FIXED_ROUNDS,
    answer_floor_rounds,
    check_answer_deadline,
    segment_replay_s,
)
from hypertrain.protocol.errors import DeadlineError
from hypertrain.protocol.manifest import RunManifest
from tests.challenge.helpers import manifest_doc

PROXY = {"vocab_size": 4096, "d_model": 256, "num_layers": 4, "num_heads": 4, "head_dim": 64,
         "ffn_hidden": 704, "context_length": 256}  # fmt: skip


def _manifest(j: int = 2, model: dict[str, Any] | None = None, **dispute: Any) -> RunManifest:
    doc = manifest_doc()
    doc["round"] = {**doc["round"], "inner_steps": 4 * j, "checkpoint_interval": j}
    doc["model"] = {**(model or doc["model"]), "context_length": 256}
    doc["data"] = {**doc["data"], "seq_len": 64}
    doc["dispute"] = dispute
    return RunManifest.model_validate(doc)


def test_the_floor_grows_with_the_work_of_a_segment() -> None:
    small, proxy = _manifest(), _manifest(model=PROXY)
    assert answer_floor_rounds(small) == ANSWER_FIXED_ROUNDS + 1  # a tiny replay: one round
    assert segment_replay_s(_manifest(j=8, model=PROXY)) == 4 * segment_replay_s(proxy)
    assert answer_floor_rounds(proxy) > answer_floor_rounds(small)
    assert answer_floor_rounds(proxy, period_s=1) > answer_floor_rounds(proxy, period_s=3)
    gpu = proxy.model_copy(
        update={"determinism": proxy.determinism.model_copy(update={"device_class": "cuda:H100"})}
    )
    assert segment_replay_s(gpu) < segment_replay_s(proxy) / 100  # an accelerator's rate


def test_an_answer_deadline_under_the_floor_is_refused_naming_the_fix() -> None:
    check_answer_deadline(_manifest())  # the defaults hold a small model's replay
    long = _manifest(j=4, model=PROXY, answer_rounds=10, clock_rounds=60)
    floor = answer_floor_rounds(long)
    assert 10 < floor < 60  # 4 steps of 20 samples of 64 tokens: about 16 s, 48 s with margin
    with pytest.raises(DeadlineError) as refused:
        check_answer_deadline(long)
    text = str(refused.value)
    assert "dispute.answer_rounds = 10 beacon rounds cannot hold one answer" in text
    assert f"at least {floor}" in text and "checkpoint_interval" in text
    check_answer_deadline(_manifest(j=4, model=PROXY, answer_rounds=floor, clock_rounds=floor))
    with pytest.raises(DeadlineError, match="clock_rounds = 5"):  # a whole game holds one too
        check_answer_deadline(_manifest(answer_rounds=5, clock_rounds=5), period_s=0.01)
    with pytest.raises(DeadlineError, match="period must be positive"):
        answer_floor_rounds(long, period_s=0)
