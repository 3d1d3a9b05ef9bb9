"""Hypertrain: verifiable, permissionless pretraining for a Bittensor subnet.

Packages are layered; imports flow downward only (see docs/architecture.md):
``protocol`` at the bottom, then ``data``/``beacon``/``ledger``, ``trainer``,
``challenge``/``aggregator``/``auditor``, and ``miner``/``relay``/``devnet`` on top.
"""

__version__ = "0.1.0"
