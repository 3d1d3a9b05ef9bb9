"""An honest island's public update from three rounds back, replayed: zero compute, merged
(before the run sketch; now excluded as ``near_duplicate``).

docs/mechanism.md (Unaudited rounds): the merge's statistics "stop every strategy that is
a function of other islands' public updates (copies, noisy copies, averages, ...; earlier
rounds' public updates count too)"; docs/threats.md (Merge): an earlier round's public
update "submitted again, not byte-identical" is ``near_duplicate``, because "the copy span
holds the last 2 rounds' merged updates".

Every merged update stays public on the relay. The exact span reaches back 2 rounds
only (and holds at most 32 updates), and ``stale_update`` knows exact hashes only, so a
zero-compute island that re-encodes an honest update merged 3 rounds earlier, scaled by
0.97, has a new hash, was explained by nothing in the span, and still points with the
run's direction. Every other public update of the run is now screened in the run sketch
(``Tape.older``, :mod:`hypertrain.aggregator.sketch`).

Honest updates are modelled as in tests/aggregator/test_outsider_2.py
(one shared direction plus each island's own part; consecutive rounds' shared directions
correlated 0.5, every earlier update audit-proven), with the aggregator's span: the
public updates of rounds 1 and 2 exactly, and round 0's in the sketch, when it merges
round 3.
"""

from __future__ import annotations

from hypertrain.aggregator.merge import MergeInputs, max_tokens, merge
from hypertrain.aggregator.norms import update_norm
from hypertrain.aggregator.tape import Candidate, Earlier
from hypertrain.aggregator.verify import verify_tape
from tests.aggregator.test_outsider_2 import Tensors, _Round


class _Chain(_Round):
    """Rounds 0, 1, 2 merged (four honest updates each); round 3 open."""

    def __init__(self) -> None:
        super().__init__()
        shared = self.shared
        self.by_round: dict[int, dict[str, Tensors]] = {}
        for index in (2, 1, 0):  # each round's direction correlated 0.5 with the next one's
            shared = self.mix((0.5, shared), (0.87, self.random()))
            self.by_round[index] = {
                f"h{i}": self.mix((0.6, shared), (0.8, self.random())) for i in range(4)
            }
        public = {
            r: [
                Earlier(
                    round=r, hotkey=h, update_sha256=self.blobs.put(self.encode(t)), proven=True
                )
                for h, t in self.by_round[r].items()
            ]
            for r in (0, 1, 2)
        }
        self.earlier = public[1] + public[2]  # the exact span: the last 2 merged rounds
        self.older = public[0]  # every other public update of the run: the run sketch

    def put(self, tensors: Tensors) -> str:
        return self.blobs.put(self.encode(tensors))

    def merge_round_3(self, attacker: Tensors) -> tuple[list[str], str]:
        tokens = max_tokens(self.manifest)
        candidates = []
        for seq, (hotkey, tensors) in enumerate({**self.honest, "z": attacker}.items()):
            data = self.encode(tensors)
            sha = self.blobs.put(data)
            candidates.append(
                Candidate(
                    hotkey=hotkey, update_sha256=sha, tokens=tokens, update_bytes=len(data), seq=seq
                )
            )
        shapes = [(k, tuple(v.shape)) for k, v in self.start.items()]
        proven = update_norm(self.encode(self.by_round[2]["h0"]), shapes)
        inputs = MergeInputs(
            manifest=self.manifest, round=3, start_model_sha256=self.start_sha,
            prev_outer_state_sha256=None, candidates=candidates, history_norms=[proven] * 8,
            earlier=self.earlier, older=self.older,
        )  # fmt: skip
        tape = merge(inputs, self.blobs).tape
        assert verify_tape(tape, self.blobs).identical
        why = {e.hotkey: e.reason for e in tape.excluded}
        return [i.hotkey for i in tape.included], str(why)


def test_an_update_from_three_rounds_back_replayed_is_not_merged() -> None:
    """Proves a rescaled replay of a public update merged 3 rounds earlier is not merged
    (and so not paid) in an unaudited round."""
    chain = _Chain()
    replayed = {n: 0.97 * t for n, t in chain.by_round[0]["h2"].items()}
    included, excluded = chain.merge_round_3(replayed)
    assert "z" not in included, (
        f"round 0's h2 update, rescaled, is merged (and paid) in round 3: {included};"
        f" excluded {excluded}"
    )


def test_an_update_from_the_round_before_replayed_is_not_merged() -> None:
    """The span's own case, on the same chain: the defence holds inside 2 rounds."""
    chain = _Chain()
    replayed = {n: 0.97 * t for n, t in chain.by_round[2]["h2"].items()}
    included, excluded = chain.merge_round_3(replayed)
    assert "z" not in included, excluded
