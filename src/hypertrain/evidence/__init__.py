"""Evidence: what every party derives from public records, and how it answers a dispute.

Miners, auditors and referees all stand on this package; none of them imports another.
Everything here is checked against a committed hash before use: the manifest and round
records against the coordinator's signature (:mod:`.verify`), an island's checkpoints
against its committed Merkle root (:mod:`.index`), samples against the dataset root and
the round's assignment (:mod:`.inputs`), and the round's start state under the run's
state policy (:mod:`.start`). An island prepares its round with exactly these functions
and an auditor checks it with them, so both compute the same thing from the same records.

The party's side of a dispute lives here too: :mod:`.trace` records one step's
operations section by section, :mod:`.party` answers the game's queries from a
segment's start state, and :mod:`.respond` posts those answers for an island or an
auditor. What the referee itself runs is in :mod:`hypertrain.referee`.
"""
