from __future__ import annotations

import pytest

from hypertrain.protocol.retry import Backoff, retry


def test_retries_what_the_caller_names_with_doubling_waits() -> None:
    waits: list[float] = []
    answers = iter([OSError("down"), 503, 200])

    def call() -> int:
        value = next(answers)
        if isinstance(value, Exception):
            raise value
        return value

    got = retry(call, Backoff(3, 0.5), retry_on=lambda e: isinstance(e, OSError),
                retry_if=lambda v: v == 503, sleep=waits.append)  # fmt: skip
    assert got == 200 and waits == [0.5, 1.0]


def test_the_last_attempt_and_other_errors_are_the_callers() -> None:
    waits: list[float] = []
    with pytest.raises(OSError):
        retry(lambda: (_ for _ in ()).throw(OSError("x")), Backoff(2, 1.0),
              retry_on=lambda e: True, sleep=waits.append)  # fmt: skip
    assert waits == [1.0]
    assert retry(lambda: 503, Backoff(2, 0.0), retry_if=lambda v: True, sleep=waits.append) == 503
    with pytest.raises(KeyError):
        retry(lambda: {}["k"], Backoff(5, 0.0), retry_on=lambda e: isinstance(e, OSError))
    with pytest.raises(ValueError):
        Backoff(0, 1.0)
