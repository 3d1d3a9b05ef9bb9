"""Prometheus metrics: request latency per route, plus gauges read from the live state.

Each app has its own registry (several apps can live in one test process). The
state collector reads counters and table sizes at scrape time, so nothing has to
remember to update a gauge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hypertrain.challenge import database
from hypertrain.challenge.state import ServiceState


class StateCollector(Collector):
    def __init__(self, get_state: Callable[[], ServiceState | None]) -> None:
        self._get_state = get_state

    def collect(self) -> Iterator[Metric]:
        state = self._get_state()
        if state is None:
            return
        events = CounterMetricFamily(
            "hypertrain_challenge_events", "Accepted events by kind", labels=["kind"]
        )
        for name, value in sorted(state.counters.items()):
            events.add_metric([name], value)
        yield events
        rows = GaugeMetricFamily(
            "hypertrain_challenge_rows", "Stored records by table", labels=["table"]
        )
        for table, count in database.row_counts(state.conn).items():
            rows.add_metric([table], count)
        yield rows
        beacon = state.current.round if state.current else 0
        yield GaugeMetricFamily(
            "hypertrain_challenge_beacon_round", "Latest verified beacon round", value=beacon
        )
        yield GaugeMetricFamily(
            "hypertrain_challenge_metagraph_stale",
            "1 when the last metagraph refresh failed",
            value=int(state.metagraph.stale),
        )


def new_registry(
    get_state: Callable[[], ServiceState | None],
) -> tuple[CollectorRegistry, Histogram]:
    registry = CollectorRegistry()
    registry.register(StateCollector(get_state))
    latency = Histogram(
        "hypertrain_challenge_request_seconds",
        "Request latency by route and status",
        ["route", "status"],
        registry=registry,
        buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0),
    )
    return registry, latency
