"""Registration checks: allow-list files and metagraph snapshots."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from hypertrain.relay.errors import RelayError
from hypertrain.relay.registry import MetagraphRegistry, StaticRegistry, parse_hotkeys

A = "5C4hrfjw9DjXZTzV3MwzrrAr9P1MJhSrvWGWqi1eSuyUpnhM"
B = "5HGjWAeFDfFCWPsjFQdVV2Msvz2XtMktvgocEZcCj68kUMaw"


def test_parse_both_shapes() -> None:
    assert parse_hotkeys(json.dumps([A, B]).encode(), "x") == {A, B}
    assert parse_hotkeys(json.dumps({"hotkeys": {A: 0}, "block": 9}).encode(), "x") == {A}
    for bad in (b"{}", b'{"hotkeys": 3}', b"[1, 2]", b"not json", b'"A"'):
        with pytest.raises(RelayError) as info:
            parse_hotkeys(bad, "src")
        assert info.value.reason == "bad_registry"


def test_static_registry_reloads_and_fails_closed(tmp_path: Path) -> None:
    path = tmp_path / "allow.json"
    path.write_text(json.dumps([A]))
    registry = StaticRegistry(path)
    assert registry(A) and not registry(B)
    path.write_text(json.dumps({"hotkeys": {B: 1}}))
    os.utime(path, ns=(1, 10**18))  # make sure the mtime changes
    assert registry(B) and not registry(A)
    path.write_text("broken")
    os.utime(path, ns=(1, 2 * 10**18))
    assert not registry(B)
    with pytest.raises(RelayError):
        StaticRegistry(path)  # a bad file at start-up is an error


def test_metagraph_registry_caches_and_goes_stale() -> None:
    calls: list[int] = []
    state = {"fail": False}

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if state["fail"]:
            return httpx.Response(503)
        return httpx.Response(200, json={"hotkeys": {A: 0}})

    now = [0.0]
    client = httpx.Client(transport=httpx.MockTransport(handler))
    registry = MetagraphRegistry(
        "http://master/v1/metagraph/latest",
        refresh_s=10,
        max_stale_s=100,
        client=client,
        clock=lambda: now[0],
    )
    assert registry(A) and not registry(B)
    assert len(calls) == 1  # cached
    state["fail"] = True
    now[0] = 50.0
    assert registry(A)  # fetch failed but the snapshot is still fresh enough
    now[0] = 200.0
    assert not registry(A)  # too stale: fail closed
    assert len(calls) == 3
