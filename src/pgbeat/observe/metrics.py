"""Prometheus metrics for workers and schedulers, served with ``--metrics-port``.

Counters and histograms are updated by the loops through the small ``Metrics`` interface;
the queue's depth is read from the database when scraped, at most every few seconds and
at a bounded cost. The ``kind`` label takes the kinds this process knows (its handlers,
its schedules) and ``other`` for the rest: anyone who can enqueue can invent kinds, and
each label value is a time series kept forever.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, LiteralString

import psycopg
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from pgbeat.db import connections
from pgbeat.db.sql.jobs import metrics as metrics_sql
from pgbeat.errors import DatabaseUnavailable
from pgbeat.observe.schema_label import served_registry

log = logging.getLogger("pgbeat.metrics")

OTHER_KIND = "other"  # the label of every kind this process does not know
DEPTH_EVERY_SECONDS = 10.0  # scrapes within this long of a read reuse it
DEPTH_CAP = 10_000  # rows a status is counted up to; beyond it, an estimate
SAMPLE_PAGES = 200  # pages of jobs sampled for the estimate (~1.6 MB, ~10-20k rows)
ACTIVE_STATUSES = ("pending", "running", "failed")  # counted through partial indexes


class Metrics:
    """What the loops report. This base class records nothing (metrics off)."""

    def job_finished(self, kind: str, verdict: str, seconds: float) -> None: ...

    def claimed(self, count: int) -> None: ...

    def periods(self, schedule: str, inserted: int, existing: int) -> None: ...

    def reconnected(self, component: str) -> None: ...

    def retention_deleted(self, status: str, count: int) -> None: ...

    def late_periods(self, schedule: str, count: int) -> None: ...


class PrometheusMetrics(Metrics):
    """Metrics in a prometheus_client registry of their own.

    ``kinds`` are the kinds that get a label of their own (a worker's handlers, a
    scheduler's schedules); every other kind is counted as ``other``. With ``schema``
    (``--schema``) every sample served is labelled with it.
    """

    def __init__(
        self, url: str | None = None, kinds: Iterable[str] = (), schema: str | None = None
    ) -> None:
        self._kinds = frozenset(kinds)
        self._schema = schema
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
        self._retention_deleted = Counter(
            "pgbeat_retention_deleted_jobs",
            "Finished jobs deleted by retention in this process, by status.",
            ["status"],
            registry=self.registry,
        )
        self._late = Counter(
            "pgbeat_schedule_late_periods",
            "Periods this process judged late: their job had not ended done by the "
            "schedule's deadline (each period is judged by one replica).",
            ["schedule"],
            registry=self.registry,
        )
        if url is not None:
            self.registry.register(QueueDepthCollector(url, self.kind_label))

    def kind_label(self, kind: str) -> str:
        """``kind`` if this process knows it, else ``other``: a bounded set of labels."""
        return kind if kind in self._kinds else OTHER_KIND

    def job_finished(self, kind: str, verdict: str, seconds: float) -> None:
        label = self.kind_label(kind)
        self._jobs.labels(label, verdict).inc()
        self._duration.labels(label).observe(seconds)

    def claimed(self, count: int) -> None:
        self._claims.observe(count)

    def periods(self, schedule: str, inserted: int, existing: int) -> None:
        if inserted:
            self._periods.labels(schedule, "inserted").inc(inserted)
        if existing:
            self._periods.labels(schedule, "existing").inc(existing)

    def reconnected(self, component: str) -> None:
        self._reconnects.labels(component).inc()

    def retention_deleted(self, status: str, count: int) -> None:
        self._retention_deleted.labels(status).inc(count)

    def late_periods(self, schedule: str, count: int) -> None:
        self._late.labels(schedule).inc(count)

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Serve /metrics on a daemon thread (loopback unless ``host`` says otherwise)."""
        start_http_server(port, addr=host, registry=served_registry(self.registry, self._schema))
        log.info("metrics on http://%s:%d/metrics", host, port)


class QueueDepthCollector(Collector):
    """Jobs by status and kind, and the oldest due job's wait, read at most every ``every`` s.

    Scrapes within ``every`` seconds of a read reuse it, however many scrapers ask. A read
    costs at most a few times ``cap`` rows (db/sql/jobs/metrics.py); on a larger table the
    counts it cannot afford to take exactly are estimates, marked by
    ``pgbeat_queue_jobs_estimated{status}``.
    """

    def __init__(
        self,
        url: str,
        kind_label: Callable[[str], str] = str,
        *,
        every: float = DEPTH_EVERY_SECONDS,
        cap: int = DEPTH_CAP,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._url = url
        self._kind_label = kind_label
        self._every = every
        self._cap = cap
        self._clock = clock
        self._lock = threading.Lock()
        self._last: tuple[float, QueueDepth] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        found = self.depth()
        if found is None:
            return
        depth = GaugeMetricFamily(
            "pgbeat_queue_jobs", "Jobs by status and kind.", labels=["status", "kind"]
        )
        for (status, kind), count in sorted(found.counts.items()):
            depth.add_metric([status, kind], count)
        estimated = GaugeMetricFamily(
            "pgbeat_queue_jobs_estimated",
            "1 where pgbeat_queue_jobs is an estimate (too many jobs of that status to count).",
            labels=["status"],
        )
        for status in sorted({status for status, _ in found.counts} | found.estimated):
            estimated.add_metric([status], float(status in found.estimated))
        oldest = GaugeMetricFamily(
            "pgbeat_oldest_due_job_age_seconds",
            "How long the oldest due, unclaimed job has waited.",
        )
        oldest.add_metric([], found.oldest_due_age)
        finished = GaugeMetricFamily(
            "pgbeat_oldest_finished_job_age_seconds",
            "How long ago the oldest finished job still kept finished (0: none kept); "
            "retention keeps it near --failed-retention.",
        )
        finished.add_metric([], found.oldest_finished_age)
        yield depth
        yield estimated
        yield oldest
        yield finished

    def depth(self) -> QueueDepth | None:
        """The last read if it is recent, else a new one; None if the database failed."""
        with self._lock:
            now = self._clock()
            if self._last is not None and now - self._last[0] < self._every:
                return self._last[1]
            try:
                with connections.connect(self._url, timeout=3) as conn:
                    found = read_depth(conn, self._cap, self._kind_label)
            except (psycopg.Error, DatabaseUnavailable) as exc:
                log.warning("metrics: could not read the queue depth: %s", type(exc).__name__)
                return None
            self._last = (now, found)
            return found


@dataclass(frozen=True)
class QueueDepth:
    """Jobs by (status, kind label); the statuses whose counts are estimates; the oldest wait."""

    counts: dict[tuple[str, str], float]
    estimated: frozenset[str]
    oldest_due_age: float
    oldest_finished_age: float = 0.0


def read_depth(
    conn: psycopg.Connection[Any], cap: int, kind_label: Callable[[str], str] = str
) -> QueueDepth:
    """Count the queue, reading a bounded number of rows however large the table is."""
    rows: list[tuple[str, str, float]]
    estimated: frozenset[str] = frozenset()
    total = _scalar(conn, metrics_sql.JOBS_COUNT_UP_TO, {"cap": cap})
    if total <= cap:
        rows = conn.execute(metrics_sql.JOBS_DEPTH_ALL).fetchall()
    else:
        active = conn.execute(metrics_sql.JOBS_DEPTH_ACTIVE, {"cap": cap}).fetchall()
        pages = _scalar(conn, metrics_sql.JOBS_PAGES, {})
        percent = min(100.0, 100.0 * SAMPLE_PAGES / max(pages, 1))
        sample = conn.execute(metrics_sql.JOBS_DEPTH_SAMPLE, {"percent": percent}).fetchall()
        rows, estimated = merge_counts(active, sample, 100.0 / percent, cap)
    oldest = conn.execute(metrics_sql.JOBS_OLDEST_DUE_AGE).fetchone()
    finished = conn.execute(metrics_sql.JOBS_OLDEST_FINISHED_AGE).fetchone()
    return QueueDepth(
        by_kind_label(rows, kind_label),
        estimated,
        float(oldest[0] or 0.0) if oldest is not None else 0.0,
        float(finished[0] or 0.0) if finished is not None else 0.0,
    )


def merge_counts(
    active: Sequence[tuple[str, str, int]],
    sample: Sequence[tuple[str, str, int]],
    scale: float,
    cap: int,
) -> tuple[list[tuple[str, str, float]], frozenset[str]]:
    """Exact counts of the states counted below the cap, scaled sample counts of the rest."""
    totals: dict[str, int] = {}
    for status, _, count in active:
        totals[status] = totals.get(status, 0) + count
    exact = {status for status in ACTIVE_STATUSES if totals.get(status, 0) < cap}
    rows = [(s, k, float(c)) for s, k, c in active if s in exact]
    rows += [(s, k, c * scale) for s, k, c in sample if s not in exact]
    estimated = {s for s, _, _ in sample if s not in exact} | (set(ACTIVE_STATUSES) - exact)
    return rows, frozenset(estimated)


def by_kind_label(
    rows: Iterable[tuple[str, str, float]], kind_label: Callable[[str], str]
) -> dict[tuple[str, str], float]:
    """Counts summed by (status, label): kinds without a label of their own add up under one."""
    counts: dict[tuple[str, str], float] = {}
    for status, kind, count in rows:
        key = (status, kind_label(kind))
        counts[key] = counts.get(key, 0.0) + float(count)
    return counts


def _scalar(conn: psycopg.Connection[Any], statement: LiteralString, params: dict[str, Any]) -> int:
    row = conn.execute(statement, params).fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0
