"""Honest islands on the real tiny model, round after round: the robust merge loses none.

The copy screen projects each update onto this round's others *and* the last rounds'
public updates, and "against" is decided with the audit-proven direction of those
rounds. Real updates of one round are far more aligned than the synthetic ones of the
other tests (pairwise cosine 0.6 to 0.8 on this model, 0.3 of their norm or more outside
the span of the others), so this is where a false positive would show: four islands
train three rounds from the merged model; round 0 is audited (probation), rounds 1 and
2 are not, and every honest update is merged in each.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from hypertrain.aggregator.aggregate import earlier_updates
from hypertrain.aggregator.gram import gram_matrix
from hypertrain.aggregator.merge import MergeInputs, merge
from hypertrain.aggregator.robust import COPY_RESIDUAL
from hypertrain.aggregator.screen import proven_history
from hypertrain.aggregator.tape import Candidate, Tape
from hypertrain.aggregator.verify import verify_tape
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.manifest import RunManifest
from hypertrain.protocol.messages import RoundOpen
from hypertrain.trainer.blob import encode_model_blob
from hypertrain.trainer.model import init_params, param_shapes
from tests.auditor.islands import MemoryRelay, publish_round
from tests.auditor.world import World, make_dataset, manifest_doc

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[2]
KEYS = [Hotkey.from_seed(bytes([0x90 + i]) * 32) for i in range(4)]


def _cosines(data: list[bytes], m: RunManifest) -> list[float]:
    g = gram_matrix(data, param_shapes(m.model), m.compression)
    n = len(data)
    return [g[i][j] / math.sqrt(g[i][i] * g[j][j]) for i in range(n) for j in range(i)]


def test_honest_islands_on_the_real_model_are_never_screened_out(tmp_path: Path) -> None:
    dataset = make_dataset(ROOT / "tests" / "assets", tmp_path / "dataset")
    doc = manifest_doc(dataset, inner_steps=8, checkpoint_interval=4)  # H = 8: aligned updates
    doc["audit"]["segments"] = 2
    m = RunManifest.model_validate(doc)
    blob = encode_model_blob(init_params(m.model, m.seed), m.model)
    world, relay = World(dataset, tmp_path / "dataset", m, blob), MemoryRelay()
    sha, roster = relay.put(blob), sorted(k.ss58_address for k in KEYS)
    opens: list[RoundOpen] = []
    tapes: list[Tape] = []
    for r in range(3):
        opens.append(RoundOpen.model_validate(world.round_open(r, roster, sha).body))
        pubs = [publish_round(world, relay, k, opens, tmp_path / f"r{r}-{i}") for i, k in
                enumerate(KEYS)]  # fmt: skip
        candidates = [
            Candidate(hotkey=k.ss58_address, update_sha256=p.commit.update_sha256,
                      tokens=p.commit.tokens, update_bytes=p.commit.update_bytes, seq=i)
            for i, (k, p) in enumerate(zip(KEYS, pubs, strict=True))
        ]  # fmt: skip
        inputs = MergeInputs(
            m, r, sha, None, candidates, proven=roster if r == 0 else [],
            history_norms=proven_history(reversed(tapes)),
            earlier=earlier_updates(reversed(tapes), r),
        )  # fmt: skip
        result = merge(inputs, relay)
        tape = result.tape
        assert verify_tape(tape, relay).identical
        assert tape.excluded == [] and len(tape.included) == len(KEYS), tape.excluded
        if r:  # real updates are aligned: the screens are tried where it is hard
            assert len(tape.earlier) == len(KEYS) * min(r, 2)
            assert max(_cosines([relay.get(c.update_sha256) for c in candidates], m)) > 0.5
        tapes.append(tape)
        sha = relay.put(result.model_blob)
    assert COPY_RESIDUAL < 0.5
