"""Reading a run manifest from a file an operator wrote or a service served.

Two shapes are accepted, both as strict JSON (:func:`parse_json`):

* the manifest itself, as ``hypertrain run init`` writes it; whole lines whose
  first non-blank characters are ``//`` are comments and are dropped first, so a
  manifest can explain itself section by section;
* the signed envelope the service serves at ``/v1/runs/<run>/manifest``
  (``{"body": {"manifest": {...}}, "signature": ...}``); its signature is checked
  and the manifest inside is returned.
"""

from __future__ import annotations

from typing import Any

from hypertrain.protocol.canonical import parse_json
from hypertrain.protocol.envelope import open_envelope
from hypertrain.protocol.errors import ProtocolError

MAX_MANIFEST_BYTES = 1 << 24


class ManifestFileError(ProtocolError):
    """The file is neither a manifest nor a signed manifest envelope."""


def strip_comments(text: str) -> str:
    """``text`` without its ``//`` comment lines (line numbers of the rest are kept)."""
    return "\n".join("" if ln.lstrip().startswith("//") else ln for ln in text.splitlines())


def manifest_document(data: bytes) -> dict[str, Any]:
    """The manifest JSON object in ``data`` (a commented manifest or a signed envelope)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestFileError(f"not UTF-8 text at byte {exc.start}") from None
    value = parse_json(strip_comments(text), max_bytes=MAX_MANIFEST_BYTES)
    if not isinstance(value, dict):
        raise ManifestFileError("a manifest is a JSON object")
    if "signature" in value and isinstance(value.get("body"), dict):
        verified = open_envelope(value, domain="manifest")
        inner = verified.envelope.body.get("manifest")
        if not isinstance(inner, dict):
            raise ManifestFileError("the signed envelope holds no manifest")
        return inner
    return value
