"""The miner side: everything an island runs (CLI ``hypertrain-miner``).

* :mod:`.admission`: the hardware self-check a join request carries.
* :mod:`.config`: ``miner.toml`` plus flag overrides (``load_config`` -> ``MinerConfig``).
* :mod:`.context`: the verified run (signed manifest, determinism check, round records).
* :mod:`.island`: ``train_round``, resumable training that writes a checkpoint every J steps.
* :mod:`.run`: ``run_round``, one round end to end (verify, train, upload, commit).
* :mod:`.report`: a progress bar on a terminal, JSON lines otherwise.
* :mod:`.actions` / :mod:`.cli`: the selfcheck, join, run, watch and status commands.

Verified-input helpers shared with auditors live in :mod:`hypertrain.auditor` (the
layer below), so an island prepares its round exactly as an auditor re-derives it.
docs/miner.md is the operator's guide.
"""
