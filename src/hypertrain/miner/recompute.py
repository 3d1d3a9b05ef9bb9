"""The island's own recomputation of what a verdict says it got wrong.

Before it disputes a ``mismatch``, the island recomputes the check the verdict failed
from its own stored checkpoints and the public records: the derived start state
(leaf 0), the replay of one segment (its end leaf), or the update re-encoded from its
final checkpoint. :class:`Recomputation` is the island's; a caller may pass another
:class:`Recompute` (the defence's tests do, to state what the island computed).
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from torch import Tensor

from hypertrain.evidence.inputs import fetch_start_params, island_layout
from hypertrain.miner.context import RunContext, round_records
from hypertrain.miner.disputes import segment_party
from hypertrain.miner.island import checkpoint_path
from hypertrain.miner.run import start_state
from hypertrain.protocol.identity import Hotkey
from hypertrain.protocol.messages import RoundOpen
from hypertrain.relay.client import RelayClient
from hypertrain.trainer.checkpoint import decode_checkpoint
from hypertrain.trainer.round_config import island_train_config
from hypertrain.trainer.segment import TrainConfig
from hypertrain.trainer.update import build_update


class Recompute(Protocol):
    """The island's values for the checks a ``mismatch`` can name."""

    def start_hash(self, index: int) -> bytes:
        """The hash of round ``index``'s start state as the run's policy derives it."""
        ...

    def segment_end(self, index: int, segment: int) -> bytes:
        """The state hash its replay of ``segment`` reaches from its stored checkpoint."""
        ...

    def update_sha256(self, index: int, final_leaf: bytes) -> str:
        """SHA-256 of the update encoded from its final checkpoint (which must hash to
        ``final_leaf``)."""
        ...


class Recomputation:
    """:class:`Recompute` from this island's stored checkpoints and the public records."""

    def __init__(self, ctx: RunContext, key: Hotkey, relay: RelayClient) -> None:
        self.ctx, self.key, self.relay = ctx, key, relay

    def _round(self, index: int) -> tuple[list[RoundOpen], TrainConfig, dict[str, Tensor]]:
        records, _ = round_records(self.ctx, index)
        manifest = self.ctx.manifest
        layout = island_layout(manifest, records[-1], self.key.ss58_address)
        config = island_train_config(manifest, index, layout=layout, device=self.ctx.config.device)
        params = fetch_start_params(self.relay, records[-1], manifest)[1]
        return records, config, params

    def start_hash(self, index: int) -> bytes:
        records, config, params = self._round(index)
        state = start_state(self.ctx, config, records, params, self.key.ss58_address, self.relay)
        return state.state_hash()

    def segment_end(self, index: int, segment: int) -> bytes:
        party = segment_party(self.ctx, self.key, index, segment)
        return bytes.fromhex(party.state_hashes([party.config.checkpoint_interval])[0])

    def update_sha256(self, index: int, final_leaf: bytes) -> str:
        records, config, params = self._round(index)
        start = start_state(self.ctx, config, records, params, self.key.ss58_address, self.relay)
        last = config.inner_steps // config.checkpoint_interval
        raw = checkpoint_path(self.ctx.config.round_dir(index), last).read_bytes()
        final = decode_checkpoint(raw, config.state_config(), expected_hash=final_leaf)
        update = build_update(start.params(), final, self.ctx.manifest.compression)
        return hashlib.sha256(update.data).hexdigest()
