"""The service's tables, below every resource: each module reads and writes its tables
and returns typed rows, with no policy. Here live the rounds' tables (runs, rounds,
beacons and settlements in ``rounds_storage``, and one part per table group: the roster,
commits, audit assignments, verdicts with the one standing query, merge tapes with their
corrections and proven faults, late panels), the tape witnesses' attestations, the
admission challenges, the honeypot periods, the competitions' tables, the platform's
(``get_weights`` answers, the metagraph and its departures), the dashboard's run
baselines and the dispute games' (the games, the verdicts they set aside and the
auditors they barred, the late verdicts' windows). Only the replay nonces stay with the
database itself."""
