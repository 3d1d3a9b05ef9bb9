from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypertrain.protocol.canonical import (
    MAX_SAFE_INTEGER,
    canonical_bytes,
    canonical_hash,
    parse_json,
)
from hypertrain.protocol.errors import CanonicalJSONError


def test_keys_sorted_and_no_whitespace() -> None:
    assert canonical_bytes({"b": 1, "a": [True, None, "x"]}) == b'{"a":[true,null,"x"],"b":1}'


def test_rfc8785_number_and_string_forms() -> None:
    # Values from RFC 8785 section 3.2.2 / appendix B.
    assert canonical_bytes([1e30, 4.5, 0.002, 1e-27, -0.0]) == b"[1e+30,4.5,0.002,1e-27,0]"
    assert (
        canonical_bytes('\u20ac$\u000f\nA\'B"\\\\"/')
        == b'"\xe2\x82\xac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"'
    )


def test_key_order_is_utf16() -> None:
    # RFC 8785 section 3.2.3: UTF-16 code units, so U+1F600 sorts before U+FB33.
    doc = {"\u20ac": 1, "\r": 2, "\ufb33": 5, "\U0001f600": 3, "1": 4}
    text = canonical_bytes(doc).decode()
    assert list(json.loads(text)) == ["\r", "1", "\u20ac", "\U0001f600", "\ufb33"]


def test_hash_is_sha256_of_bytes() -> None:
    import hashlib

    assert canonical_hash({"a": 1}) == hashlib.sha256(b'{"a":1}').hexdigest()


@pytest.mark.parametrize(
    "text, needle",
    [
        ('{"a": NaN}', "NaN"),
        ('{"a": Infinity}', "Infinity"),
        ('{"a": -Infinity}', "Infinity"),
        ('{"a": 1e400}', "overflows"),
        ('{"a": 1, "a": 2}', "duplicate"),
        ('{"a": 9007199254740992}', "I-JSON"),
        ('{"a": -9007199254740992}', "I-JSON"),
        ('{"a": ', "malformed"),
        ("[1, 2", "malformed"),
        ("", "malformed"),
        ("[" * 200 + "]" * 200, "nested"),
        ('"\\ud800"', "surrogate"),
    ],
)
def test_parse_refuses(text: str, needle: str) -> None:
    with pytest.raises(CanonicalJSONError, match=needle):
        parse_json(text)


def test_parse_refuses_bad_utf8_and_oversize() -> None:
    with pytest.raises(CanonicalJSONError, match="UTF-8"):
        parse_json(b'{"a": "\xff"}')
    with pytest.raises(CanonicalJSONError, match="limit"):
        parse_json(b"[" + b"1," * 100 + b"1]", max_bytes=50)


@pytest.mark.parametrize(
    "value, needle",
    [
        (float("nan"), "non-finite"),
        ({1: 2}, "not a string"),
        (2**60, "I-JSON"),
        ({"a": {1, 2}}, "not a JSON value"),
        (b"bytes", "not a JSON value"),
    ],
)
def test_canonical_refuses(value: object, needle: str) -> None:
    with pytest.raises(CanonicalJSONError, match=needle):
        canonical_bytes(value)


def test_large_integral_float_refused() -> None:
    with pytest.raises(CanonicalJSONError, match="I-JSON"):
        canonical_bytes(2.0**60)
    assert canonical_bytes(1e300) == b"1e+300"


def test_max_safe_integer_accepted() -> None:
    assert parse_json(str(MAX_SAFE_INTEGER)) == MAX_SAFE_INTEGER


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda x: not MAX_SAFE_INTEGER < abs(x) < 1e21
    )
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5)
    ),
    max_leaves=20,
)


@given(json_values)
def test_round_trip_is_stable(value: object) -> None:
    first = canonical_bytes(value)
    assert canonical_bytes(parse_json(first)) == first


@given(json_values)
def test_parse_of_pretty_json_canonicalizes_identically(value: object) -> None:
    pretty = json.dumps(value, indent=2, sort_keys=False)
    assert canonical_bytes(parse_json(pretty)) == canonical_bytes(value)


@settings(max_examples=300)
@given(json_values)
def test_fast_path_equals_reference_jcs(value: object) -> None:
    import rfc8785

    assert canonical_bytes(value) == rfc8785.dumps(value)


def test_fast_path_escapes_match_jcs() -> None:
    import rfc8785

    tricky = {"k": '\x00\x1f\x7f\u2028"\\/\b\f\n\r\t é 😀', "list": [True, None, -5, 0]}
    assert canonical_bytes(tricky) == rfc8785.dumps(tricky)
    non_ascii_keys = {"\ufb33": 1, "\U0001f600": 2, "a": 3}
    assert canonical_bytes(non_ascii_keys) == rfc8785.dumps(non_ascii_keys)
