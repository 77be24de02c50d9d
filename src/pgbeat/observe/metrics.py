"""Prometheus metrics for workers and schedulers, served with ``--metrics-port``.

Counters and histograms are updated by the loops through the small ``Metrics`` interface;
the queue's depth is read from the database at scrape time, so it is always current and
costs nothing between scrapes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pgbeat.db import queries

log = logging.getLogger("pgbeat.metrics")


class Metrics:
    """What the loops report. This base class records nothing (metrics off)."""

    def job_finished(self, kind: str, verdict: str, seconds: float) -> None: ...

    def claimed(self, count: int) -> None: ...

    def periods(self, schedule: str, inserted: int, existing: int) -> None: ...

    def reconnected(self, component: str) -> None: ...


class PrometheusMetrics(Metrics):
    """Metrics in a prometheus_client registry of their own."""

    def __init__(self, url: str | None = None) -> None:
        self.registry = CollectorRegistry()
        self._jobs = Counter(
            "pgbeat_jobs",
            "Finished runs by kind and outcome (done, retry, failed, released).",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self._duration = Histogram(
            "pgbeat_job_duration_seconds",
            "Handler run time by kind.",
            ["kind"],
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300),
        )
        self._claims = Histogram(
            "pgbeat_claim_batch_size",
            "Jobs returned by one claim query.",
            registry=self.registry,
            buckets=(0, 1, 2, 5, 10, 20, 50, 100, 200, 500),
        )
        self._periods = Counter(
            "pgbeat_periods",
            "Scheduled periods by schedule: inserted, or found already present.",
            ["schedule", "result"],
            registry=self.registry,
        )
        self._reconnects = Counter(
            "pgbeat_database_reconnects",
            "Times a loop lost the database and got it back.",
            ["component"],
            registry=self.registry,
        )
        if url is not None:
            self.registry.register(QueueDepthCollector(url))

    def job_finished(self, kind: str, verdict: str, seconds: float) -> None:
        self._jobs.labels(kind, verdict).inc()
        self._duration.labels(kind).observe(seconds)

    def claimed(self, count: int) -> None:
        self._claims.observe(count)

    def periods(self, schedule: str, inserted: int, existing: int) -> None:
        if inserted:
            self._periods.labels(schedule, "inserted").inc(inserted)
        if existing:
            self._periods.labels(schedule, "existing").inc(existing)

    def reconnected(self, component: str) -> None:
        self._reconnects.labels(component).inc()

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve /metrics on a daemon thread (loopback unless ``host`` says otherwise)."""
        start_http_server(port, addr=host, registry=self.registry)
        log.info("metrics on http://%s:%d/metrics", host, port)


class QueueDepthCollector(Collector):
    """Reads jobs by status and kind, and the oldest due job's wait, at each scrape."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily(
            "pgbeat_queue_jobs", "Jobs by status and kind.", labels=["status", "kind"]
        )
        oldest = GaugeMetricFamily(
            "pgbeat_oldest_due_job_age_seconds",
            "How long the oldest due, unclaimed job has waited.",
        )
        try:
            with self._lock, psycopg.connect(self._url, autocommit=True, connect_timeout=3) as conn:
                for status, kind, count in conn.execute(queries.JOBS_DEPTH):
                    depth.add_metric([status, kind], float(count))
                summary: Any = conn.execute(queries.JOBS_SUMMARY).fetchone()
                oldest.add_metric([], float(summary[1] or 0.0))
        except psycopg.Error as exc:
            log.warning("metrics: could not read the queue depth: %s", type(exc).__name__)
            return
        yield depth
        yield oldest
