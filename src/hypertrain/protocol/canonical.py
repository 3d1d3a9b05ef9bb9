"""Canonical JSON (RFC 8785, JCS) and a strict parser for the I-JSON subset.

``canonical_bytes`` is what gets hashed and signed everywhere. ``parse_json`` is the
only way untrusted JSON enters the system: it refuses duplicate keys, NaN/Infinity,
integers outside the I-JSON range (|n| > 2**53 - 1), excessive nesting and oversized
documents, always with :class:`CanonicalJSONError`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

import rfc8785

from hypertrain.protocol.errors import CanonicalJSONError

MAX_SAFE_INTEGER: Final = 2**53 - 1
DEFAULT_MAX_BYTES: Final = 1 << 20
MAX_DEPTH: Final = 64


def canonical_bytes(value: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON-compatible value."""
    if _check_value(value, depth=0):
        # No floats and only ASCII keys: here the C JSON encoder's output is exactly JCS
        # (same string escapes, code-point key order equals UTF-16 order for ASCII keys,
        # integers in the safe range print alike). Tested against rfc8785 in the suite.
        return json.dumps(
            value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
        ).encode("utf-8")
    try:
        return bytes(rfc8785.dumps(value))
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalJSONError(f"not canonicalizable: {exc}") from exc


def canonical_hash(value: Any) -> str:
    """Hex SHA-256 of :func:`canonical_bytes`."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def parse_json(data: bytes | str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    """Parse untrusted JSON strictly; see the module docstring for what is refused."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > max_bytes:
        raise CanonicalJSONError(f"document is {len(raw)} bytes, limit is {max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CanonicalJSONError(f"not valid UTF-8 at byte {exc.start}") from exc
    try:
        value = json.loads(
            text,
            object_pairs_hook=_unique_object,
            parse_constant=_refuse_constant,
            parse_float=_finite_float,
        )
    except CanonicalJSONError:
        raise
    except json.JSONDecodeError as exc:
        raise CanonicalJSONError(
            f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError as exc:
        raise CanonicalJSONError("JSON nested too deeply") from exc
    _check_value(value, depth=0)
    return value


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, val in pairs:
        if key in out:
            raise CanonicalJSONError(f"duplicate object key {key!r}")
        out[key] = val
    return out


def _refuse_constant(name: str) -> Any:
    raise CanonicalJSONError(f"{name} is not valid JSON (non-finite numbers are refused)")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise CanonicalJSONError(f"number {text} overflows a 64-bit float")
    return value


def _check_value(value: Any, depth: int) -> bool:
    """Walk a value and refuse anything outside the I-JSON domain.

    Returns True when the value has no floats and only ASCII object keys, the case in
    which the standard library's encoder already produces canonical bytes.
    """
    if depth > MAX_DEPTH:
        raise CanonicalJSONError(f"JSON nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        _check_string(value)
        return True
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalJSONError(f"integer {value} is outside the I-JSON range ±(2**53-1)")
        return True
    if isinstance(value, float):
        _check_float(value)
        return False
    if isinstance(value, (list, tuple)):
        simple = True
        for item in value:
            simple = _check_value(item, depth + 1) and simple
        return simple
    if isinstance(value, dict):
        return _check_object(value, depth)
    raise CanonicalJSONError(f"{type(value).__name__} is not a JSON value")


def _check_object(value: dict[Any, Any], depth: int) -> bool:
    simple = True
    for key, item in value.items():
        if not isinstance(key, str):
            raise CanonicalJSONError(f"object key {key!r} is not a string")
        if not key.isascii():
            _check_string(key)
            simple = False
        simple = _check_value(item, depth + 1) and simple
    return simple


def _check_float(value: float) -> None:
    if value != value or value in (float("inf"), float("-inf")):
        raise CanonicalJSONError(f"non-finite number {value} is refused")
    if MAX_SAFE_INTEGER < abs(value) < 1e21:
        # JCS writes these without an exponent, i.e. as an out-of-range integer.
        raise CanonicalJSONError(f"number {value} is outside the I-JSON range ±(2**53-1)")


def _check_string(value: str) -> None:
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalJSONError(
            f"string contains a lone surrogate at position {exc.start} (not valid Unicode)"
        ) from exc
