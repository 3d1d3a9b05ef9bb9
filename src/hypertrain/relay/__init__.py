"""The relay: a content-addressed blob service for updates, checkpoints and models.

Blobs are stored and served under their SHA-256; uploads need a signed ``blob-put``
envelope from a registered hotkey (or the coordinator). The relay never decodes what
it stores, so nobody has to trust it: every reader re-hashes what it fetches.
"""

from hypertrain.relay.client import RelayClient
from hypertrain.relay.errors import RelayError

__all__ = ["RelayClient", "RelayError"]
