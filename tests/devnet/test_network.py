"""The devnet's listening sockets: a taken port is one error that names the way out."""

from __future__ import annotations

import pytest

from hypertrain.devnet.errors import DevnetError
from hypertrain.devnet.network import listen


def test_a_taken_port_names_the_port_and_the_flag_that_picks_a_free_one() -> None:
    with listen(0) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(DevnetError, match=rf":{port}: .*\(--port 0 picks a free port\)"):
            listen(port)
