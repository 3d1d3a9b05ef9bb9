"""The devnet's listening sockets: a taken port is one error that names the way out."""

from __future__ import annotations

import logging

import pytest

from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.network import listen, listen_for_service


def test_a_taken_port_names_the_port_and_the_flag_that_picks_a_free_one() -> None:
    with listen(0) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(DevnetError, match=rf":{port}: .*\(--port 0 picks a free port\)"):
            listen(port)


def test_a_taken_default_port_gives_way_to_a_free_one_and_says_where(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No --port: the default (here a port this test holds) or, taken, any free one."""
    caplog.set_level(logging.WARNING, logger="hypertrain.devnet.network")
    with listen(0) as taken:
        held = taken.getsockname()[1]
        with listen_for_service(None, preferred=held) as sock:
            port = sock.getsockname()[1]
    assert port not in (0, held)
    [record] = [r for r in caplog.records if "is taken" in r.getMessage()]
    assert f"port {held} is taken" in record.getMessage()
    assert f"http://127.0.0.1:{port}" in record.getMessage()


def test_an_explicit_port_that_is_taken_stays_an_error() -> None:
    with listen(0) as taken:
        held = taken.getsockname()[1]
        with pytest.raises(DevnetError, match=r"--port 0 picks a free port"):
            listen_for_service(held, preferred=held)
