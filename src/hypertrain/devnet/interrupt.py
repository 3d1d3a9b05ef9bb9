"""Ctrl-C and SIGTERM stop the devnet, even when the KeyboardInterrupt they raise is lost.

Python raises a signal's exception wherever the main thread happens to be; raised inside
a finaliser or a callback whose errors are only printed ("Exception ignored in ..."), it
is lost, and on a loaded machine a Ctrl-C once went unanswered that way: the devnet ran
its rounds to the end with the interrupt asked. :func:`install` remembers the request as
well as raising it, and every wait of the devnet's start and of its rounds goes through
:func:`pause`, which raises it again until it is answered.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType

_asked = threading.Event()


def _handler(signum: int, frame: FrameType | None) -> None:
    _asked.set()
    raise KeyboardInterrupt


def install() -> None:
    """SIGINT and SIGTERM: remember the request and raise KeyboardInterrupt."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _handler)


def check() -> None:
    """Raise KeyboardInterrupt when a stop was asked."""
    if _asked.is_set():
        raise KeyboardInterrupt


def pause(seconds: float) -> None:
    """``time.sleep`` for the devnet's waits: raises KeyboardInterrupt once a stop was asked,
    before and after sleeping."""
    check()
    time.sleep(seconds)
    check()
