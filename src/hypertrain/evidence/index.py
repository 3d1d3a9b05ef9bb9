"""The checkpoint index: how an island publishes the checkpoints behind its Merkle root.

At commit time the island uploads a small JSON index listing, per leaf, the state hash
and the relay address (SHA-256) of the checkpoint bytes; the commit's ``checkpoint_url``
points at the index. The checkpoints themselves stay with the island until an audit
selects segments: then it uploads the start checkpoint of each selected segment, by
:func:`upload_deadline`. A checkpoint still missing after that is withheld. A requester
never trusts the index: it checks that leaf ``k`` is under the committed root with a
Merkle inclusion proof, then that the checkpoint bytes hash to that leaf (the
checkpoint decoder recomputes the state hash), so a relay or island can withhold
data but never substitute it.

Under ``carry`` the index also names ``carried``: the relay address of the state the
round carries into the island's next round (``trainer.carried``: step counter, optimizer
slots, residual; no parameters), which an audit of that next round fetches to derive its
start state. An audit that replays this round's final segment checks that address
against its replay, as it checks the final leaf.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from hypertrain.evidence.errors import VerificationError
from hypertrain.protocol.canonical import canonical_bytes, parse_json
from hypertrain.protocol.deadlines import upload_deadline as upload_deadline
from hypertrain.protocol.errors import CanonicalJSONError, MerkleError
from hypertrain.protocol.merkle import MerkleTree, verify_proof

FORMAT: Final = "hypertrain-checkpoints/1"
MAX_INDEX_BYTES: Final = 1 << 22
_FIELDS: Final = frozenset({"format", "round", "leaves", "blobs"})


@dataclass(frozen=True, slots=True)
class CheckpointIndex:
    round: int
    leaves: tuple[str, ...]  # hex state hashes at local steps 0, J, ..., H
    blobs: tuple[str, ...]  # hex SHA-256 relay addresses of the checkpoint bytes
    carried: str | None = None  # hex SHA-256 relay address of the carried state (carry)

    def to_bytes(self) -> bytes:
        doc: dict[str, Any] = {
            "format": FORMAT,
            "round": self.round,
            "leaves": list(self.leaves),
            "blobs": list(self.blobs),
        }
        if self.carried is not None:
            doc["carried"] = self.carried
        return canonical_bytes(doc)

    @classmethod
    def from_bytes(cls, data: bytes, *, leaf_count: int | None = None) -> CheckpointIndex:
        """Parse an island's index strictly (size first, then strict JSON, then types).

        ``leaf_count`` (the commit's) is checked when given. Every refusal is a
        :class:`VerificationError`; nothing else escapes, whatever the bytes.
        """
        if len(data) > MAX_INDEX_BYTES:
            raise VerificationError("checkpoint index is too large")
        try:
            doc: Any = parse_json(data, max_bytes=MAX_INDEX_BYTES)
        except CanonicalJSONError as exc:
            raise VerificationError(f"checkpoint index is malformed: {exc}") from exc
        if not isinstance(doc, dict) or set(doc) - {"carried"} != _FIELDS:
            raise VerificationError("checkpoint index is malformed: wrong fields")
        carried = doc.get("carried")
        if "carried" in doc and not _is_hex64(carried):
            raise VerificationError("checkpoint index is malformed: carried")
        rnd, leaves, blobs = doc["round"], doc["leaves"], doc["blobs"]
        if doc["format"] != FORMAT or type(rnd) is not int or rnd < 0:
            raise VerificationError("checkpoint index is malformed: format or round")
        if not isinstance(leaves, list) or not isinstance(blobs, list) or not leaves:
            raise VerificationError("checkpoint index is malformed: leaves and blobs")
        if len(leaves) != len(blobs) or not all(_is_hex64(h) for h in (*leaves, *blobs)):
            raise VerificationError("checkpoint index is malformed: leaves and blobs")
        if leaf_count is not None and len(leaves) != leaf_count:
            raise VerificationError(
                f"checkpoint index lists {len(leaves)} leaves, the commit {leaf_count}"
            )
        return cls(rnd, tuple(leaves), tuple(blobs), carried)

    def verified_leaf(self, k: int, root_hex: str) -> bytes:
        """Leaf ``k`` after checking its inclusion proof against the committed root."""
        if not 0 <= k < len(self.leaves):
            raise VerificationError(f"checkpoint index has no leaf {k}")
        leaves = [bytes.fromhex(h) for h in self.leaves]
        proof = MerkleTree.from_leaves(leaves).proof(k)
        try:
            verify_proof(bytes.fromhex(root_hex), leaves[k], proof)
        except MerkleError as exc:
            raise VerificationError(f"checkpoint leaf {k}: {exc}") from exc
        return leaves[k]


def _is_hex64(value: Any) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def sha_from_url(url: str) -> str:
    """The blob address at the end of a relay URL (``…/blobs/<sha256>``)."""
    tail = url.rstrip("/").rsplit("/", 1)[-1]
    if not _is_hex64(tail):
        raise VerificationError(f"URL {url[:80]!r} does not end in a blob hash")
    return tail
