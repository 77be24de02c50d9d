"""Prometheus: a bounded ``kind`` label, and a queue-depth scrape whose cost does not grow
with the table (read at most every few seconds, exact up to a cap, estimated beyond)."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from prometheus_client.samples import Sample

from pgbeat.db import connections
from pgbeat.observe import metrics
from pgbeat.observe.metrics import PrometheusMetrics, QueueDepthCollector
from tests.helpers import wait_for

KNOWN = ("email", "report")


def samples(registry_or_collector: Any, name: str) -> list[Sample]:
    return [
        sample
        for family in registry_or_collector.collect()
        for sample in family.samples
        if sample.name == name
    ]


def depth(collector: QueueDepthCollector) -> dict[tuple[str, str], float]:
    found = samples(collector, "pgbeat_queue_jobs")
    return {(s.labels["status"], s.labels["kind"]): s.value for s in found}


def test_unknown_kinds_share_one_label(database_url: str, conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'invented-' || n, '{}' "
        "FROM generate_series(1, 300) AS n"
    )
    conn.execute("INSERT INTO jobs (kind, payload) VALUES ('email', '{}'), ('email', '{}')")
    prometheus = PrometheusMetrics(database_url, KNOWN)
    for n in range(300):
        prometheus.job_finished(f"invented-{n}", "failed", 0.01)
    prometheus.job_finished("email", "done", 0.01)

    finished = samples(prometheus.registry, "pgbeat_jobs_total")
    assert {s.labels["kind"] for s in finished} == {"email", "other"}
    assert sum(s.value for s in finished if s.labels["kind"] == "other") == 300
    queued = {
        (s.labels["status"], s.labels["kind"]): s.value
        for s in samples(prometheus.registry, "pgbeat_queue_jobs")
    }
    assert queued == {("pending", "email"): 2.0, ("pending", "other"): 300.0}


def _rows_read(conn: psycopg.Connection[Any]) -> int:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
        "FROM pg_stat_user_tables WHERE relname = 'jobs'"
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.slow
def test_a_scrape_of_a_large_table_reads_a_bounded_number_of_rows(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    done = 200_000
    conn.execute(
        "INSERT INTO jobs (kind, payload, status, finished_at) "
        "SELECT CASE WHEN n %% 4 = 0 THEN 'report' ELSE 'email' END, '{}', 'done', now() "
        "FROM generate_series(1, %s) AS n",
        (done,),
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload) SELECT 'email', '{}' FROM generate_series(1, 300)"
    )
    conn.execute(
        "INSERT INTO jobs (kind, payload, status, locked_until) "
        "SELECT 'invented-' || n, '{}', 'running', now() + interval '1 h' "
        "FROM generate_series(1, 40) AS n"
    )
    conn.execute("ANALYZE jobs")
    kind_label = PrometheusMetrics(None, KNOWN).kind_label
    clock = [1000.0]
    collector = QueueDepthCollector(
        database_url, kind_label, every=10, cap=10_000, clock=lambda: clock[0]
    )

    before = _rows_read(conn)
    counts = depth(collector)
    read = wait_for(lambda: _rows_read(conn) - before, message="the scrape's reads counted")
    assert read < 60_000, read  # a GROUP BY over the table reads all 200,340 rows

    # Exact where it matters (pending, running), an estimate for the 200,000 done rows.
    assert counts[("pending", "email")] == 300
    assert counts[("running", "other")] == 40
    assert counts[("done", "email")] == pytest.approx(150_000, rel=0.35)
    assert counts[("done", "report")] == pytest.approx(50_000, rel=0.35)
    estimated = {
        s.labels["status"]: s.value for s in samples(collector, "pgbeat_queue_jobs_estimated")
    }
    assert estimated["done"] == 1 and estimated["pending"] == 0 and estimated["running"] == 0


def test_scrapes_within_the_window_reuse_the_last_read(
    database_url: str, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[float] = []
    connect = connections.connect

    def counted(*args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        reads.append(time.monotonic())
        return connect(*args, **kwargs)

    monkeypatch.setattr(connections, "connect", counted)
    clock = [1000.0]
    collector = QueueDepthCollector(database_url, every=10, clock=lambda: clock[0])
    conn.execute("INSERT INTO jobs (kind, payload) VALUES ('email', '{}')")
    assert depth(collector) == {("pending", "email"): 1.0}
    conn.execute("INSERT INTO jobs (kind, payload) VALUES ('email', '{}')")
    clock[0] += 9.9
    assert depth(collector) == {("pending", "email"): 1.0}  # the same read
    assert len(reads) == 1
    clock[0] += 0.2
    assert depth(collector) == {("pending", "email"): 2.0}  # read again
    assert len(reads) == 2


def test_counts_just_under_the_cap_are_exact_and_over_it_estimated() -> None:
    active = [("pending", "email", 99), ("running", "email", 100), ("failed", "email", 3)]
    sample = [("done", "email", 10), ("running", "email", 4), ("pending", "email", 1)]
    rows, estimated = metrics.merge_counts(active, sample, scale=50.0, cap=100)
    assert sorted(rows) == [
        ("done", "email", 500.0),
        ("failed", "email", 3.0),
        ("pending", "email", 99.0),
        ("running", "email", 200.0),
    ]
    assert estimated == {"done", "running"}
