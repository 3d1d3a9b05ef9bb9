"""The devnet: a whole Hypertrain network on one machine, on loopback.

``hypertrain devnet`` (and ``make devnet``) prepares a small corpus, generates every
key and token, then starts as separate processes the local beacon, the challenge
service (which also serves the web dashboard), a relay, N honest islands, one
honeypot island (the ordinary miner run through ``hypertrain.honeypot.island``: honest
for its first rounds, then cheating in a randomly chosen way), an auditor, the
aggregator and a tape witness (settlement waits for its agreement). It opens R outer
rounds, shows live progress in the terminal, and at the end writes a report (JSON +
Markdown) and exports the final model as a transformers-loadable directory. See docs/devnet.md.

Entry points: :func:`hypertrain.devnet.orchestrator.run_devnet` and the CLI group
``devnet`` (:mod:`hypertrain.devnet.cli`).
"""
