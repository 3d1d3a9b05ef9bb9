"""Availability, judged once: an update counts for its round only if it reached the relay
by the round's upload deadline, by the relay's arrival record.

Whether a committed update is ``missing_blob`` must be one fact for every party that
recomputes a tape (the aggregator, a witness, ``verify-tape``, a rollback's replay),
whenever it asks. "Does the relay hold it now" is not one: an island that withholds its
update until the tape is out and uploads it afterwards would make an honest witness
recompute a different tape than the honest aggregator's, and contest it. So the tape
names its deadline (``Tape.updates_by_round``:
:func:`~hypertrain.protocol.deadlines.updates_by_round` of the round's audit selection,
which a witness checks against the public round record), and an update counts only if
the relay's arrival record (:mod:`hypertrain.relay.arrival`, which a later upload never
moves) says it first arrived by that beacon round. An update the relay does not hold,
holds without a record, or first received later is ``missing_blob``.

Absence is a fact only once the relay's own clock is past the deadline (a blob may still
arrive in time before that): until then :func:`check_arrival` raises
:class:`UndecidedError`, which is no finding, and the caller retries its step. The
relay's clock is read *before* the arrival record, so a blob that arrives between the
two reads is recorded after the deadline.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from hypertrain.aggregator.errors import AggregatorError, BlobError
from hypertrain.api.models import RoundDetail
from hypertrain.protocol.deadlines import updates_by_round


class UndecidedError(ValueError):
    """The upload deadline has not passed on the relay's clock: availability is not a
    fact yet (not an :class:`AggregatorError`: a witness never attests on it)."""


@runtime_checkable
class ArrivalSource(Protocol):
    """A blob source that publishes its arrival records."""

    def arrival_round(self, sha256: str) -> int | None:
        """The beacon round of the blob's first arrival (None: held without a record);
        raises ``BlobError("missing_blob")`` when it is not held."""

    def clock_round(self) -> int:
        """The source's current beacon round (the clock its records are read on)."""


def updates_deadline(detail: RoundDetail) -> int | None:
    """The upload deadline of a round's updates, from its public record (None before
    its audit selection)."""
    selection = detail.selection_beacon_round
    return None if selection is None else updates_by_round(selection)


def check_arrival(source: object, sha256: str, by_round: int) -> None:
    """Raise ``BlobError("missing_blob")`` unless the update ``sha256`` first arrived by
    beacon round ``by_round``; :class:`UndecidedError` while that may still change."""
    if not isinstance(source, ArrivalSource):
        raise AggregatorError("this blob source keeps no arrival record (needed by the tape)")
    now = source.clock_round()
    late = BlobError(
        "missing_blob", f"update {sha256[:16]}… did not reach the relay by beacon round {by_round}"
    )  # one text however and whenever it is asked, so every recomputation writes the same
    try:
        arrived = source.arrival_round(sha256)
    except BlobError as exc:
        if exc.reason != "missing_blob":
            raise
        if now <= by_round:
            raise UndecidedError(
                f"update {sha256[:16]}… is not on the relay yet and its upload deadline"
                f" (beacon round {by_round}) has not passed (relay round {now})"
            ) from None
        raise late from None
    if arrived is None or arrived > by_round:  # no record, or first seen after the deadline
        raise late
