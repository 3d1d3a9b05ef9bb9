"""The auditor: replay sampled segments of an island's round and compare bytes.

An auditor trusts nobody it talks to. Everything it uses is checked against a
committed hash before use: the manifest and round record against the coordinator's
signature, the island's checkpoint against its committed Merkle root with an inclusion
proof, every sample against the dataset root, and the start model against the round
record's hash (all in :mod:`hypertrain.evidence`, which the miner prepares its own
round with). It then replays ``J`` steps per assigned segment (:mod:`.replay`),
compares the resulting state hash with the committed leaf, re-encodes the final update
when the final segment is assigned, and posts a signed verdict (:mod:`.runner`).
"""
