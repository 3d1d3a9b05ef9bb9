"""The auditor: replay sampled segments of an island's round and compare bytes.

An auditor trusts nobody it talks to. Everything it uses is checked against a
committed hash before use: the manifest and round record against the coordinator's
signature (:mod:`.verify`), the island's checkpoint against its committed Merkle root
with an inclusion proof (:mod:`.index`), every sample against the dataset root
(:mod:`.inputs`), and the start model against the round record's hash. It then
replays ``J`` steps per assigned segment (:mod:`.replay`), compares the resulting
state hash with the committed leaf, re-encodes the final update when the final
segment is assigned, and posts a signed verdict (:mod:`.runner`).

These verified-input helpers are also what the miner uses to prepare its own round,
so both sides compute the same thing from the same public records (the miner
package sits above this one).
"""
