"""A round's data-assignment key: which beacon randomness fixes the samples of round ``r``.

``H_assign(JCS({"run_id", "round", "randomness"}))`` (docs/mechanism.md). Without
overlapped rounds the randomness is the beacon round the round opens at. With them
(``round.overlap``) it is the randomness of the beacon round that selected round
``r - 1``'s audits (the first beacon round after round ``r - 1``'s commits closed), when
round ``r - 1`` had one: an island that committed round ``r - 1`` knows its round-``r``
samples as soon as that beacon round is out, and can train them while round ``r - 1`` is
audited and merged; nobody knew them before every round-``r - 1`` commit was fixed.
"""

from __future__ import annotations

from hypertrain.protocol.canonical import canonical_bytes
from hypertrain.protocol.domains import ASSIGNMENT_KEY, tagged_hash


def assignment_key(run_id: str, round_index: int, randomness_hex: str) -> str:
    """The data-assignment key (hex) of ``round_index`` from a beacon round's randomness."""
    doc = {"run_id": run_id, "round": round_index, "randomness": randomness_hex}
    return tagged_hash(ASSIGNMENT_KEY, canonical_bytes(doc)).hex()


def keying_randomness(overlap: bool, open_randomness: str, previous_selection: str | None) -> str:
    """The randomness a round's key is derived from (see the module docstring):
    ``previous_selection`` is the randomness that selected the previous round's audits
    (None: no previous round, or it had no selection)."""
    if overlap and previous_selection is not None:
        return previous_selection
    return open_randomness
