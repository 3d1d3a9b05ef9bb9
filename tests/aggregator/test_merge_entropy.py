"""A run with entropy-coded 4-bit updates (the recipe's ``compression.entropy``): honest
updates merge into an entropy-coded broadcast, and hostile coded bytes are screened."""

from __future__ import annotations

import struct

from hypertrain.aggregator.merge import merge
from hypertrain.protocol.manifest import RunManifest
from hypertrain.trainer import entropy
from hypertrain.trainer.codec import code_format, encode_quantized, parse_header
from tests.aggregator.helpers import HOTKEYS, World, delta


def _coded_world() -> World:
    w = World(lr=1.0, momentum=0.0, broadcast="int4")
    doc = w.manifest.model_dump(mode="json")
    doc["compression"] |= {"bits": 4, "entropy": True}
    w.manifest = RunManifest.model_validate(doc)
    return w


def _update(w: World, seed: int) -> bytes:
    return encode_quantized(delta(w.manifest, seed), w.manifest.compression.block_size, 4, True)


def _section(data: bytes) -> int:
    """The offset of the entropy section (after every tensor's scales)."""
    block, metas, pos = parse_header(data)
    return pos + sum(4 * -(-m.numel // block) for m in metas)


def test_honest_coded_updates_merge_into_a_coded_broadcast() -> None:
    w = _coded_world()
    for i in range(3):
        w.add(i, data=_update(w, i))
    result = merge(w.inputs(), w.blobs)
    assert sorted(i.hotkey for i in result.tape.included) == sorted(HOTKEYS[:3])
    assert result.broadcast_blob is not None and code_format(result.broadcast_blob) == (4, True)


def test_hostile_coded_updates_are_screened() -> None:
    w = _coded_world()
    w.add(0, data=_update(w, 0))
    w.add(1, data=_update(w, 1))
    good = _update(w, 2)
    block = w.manifest.compression.block_size
    w.add(2, data=encode_quantized(delta(w.manifest, 2), block, 4))  # plain HTQ4
    w.add(3, data=good[:-1])  # truncated
    at = _section(good)
    w.add(4, data=good[:at] + bytes([1, 1, 1]) + good[at + 3 :])  # lengths: no prefix code
    head = at + 15  # the chunk-length table of u16s
    first, second = struct.unpack_from("<2H", good, head)
    shifted = good[:head] + struct.pack("<2H", first + 1, second - 1) + good[head + 4 :]
    w.add(5, data=shifted)  # a chunk that does not end where its length says
    w.add(6, data=good[:-1] + bytes([good[-1] ^ 0x80]))  # the last byte's top bit
    reasons = {e.hotkey: e.reason for e in merge(w.inputs(), w.blobs).tape.excluded}
    assert reasons == {
        HOTKEYS[2]: "malformed", HOTKEYS[3]: "wrong_size", HOTKEYS[4]: "malformed",
        HOTKEYS[5]: "malformed", HOTKEYS[6]: "malformed",
    }  # fmt: skip
    assert sum(m.numel for m in parse_header(good)[1]) > entropy.CHUNK  # two chunks or more
