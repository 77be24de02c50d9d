"""``python -m bench.ui_bench``: the dashboard's page times and database CPU on a big table.

Builds (once, then reuses) a database ``pgbeat_ui_bench`` whose jobs table holds 5,000,000
rows of 1,000 kinds in mixed statuses, serves the dashboard on it with uvicorn, and
measures every page: the server time of each (median of ``--repeat`` requests) and the
CPU the dashboard's database backends spend on it, read from /proc. The CPU of one open
page refreshing every 5 s follows from the per-request figure. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import uvicorn
from psycopg import sql

from bench import machine
from bench.database import admin_url, with_database
from pgbeat.db.migrate import apply_migrations
from pgbeat.scheduling.file import parse_schedules
from pgbeat.scheduling.sync import sync_file
from pgbeat.ui import create_app

DATABASE = "pgbeat_ui_bench"
ROWS = 5_000_000
KINDS = 1_000
TARGET_MS = 300.0

# Statuses by row number: 4 % failed, 3 % pending due, 2 % pending later, 1 % running,
# the rest done; finished and created times spread over the last 7 days, newest last. Jobs
# that ran started 0 to 0.95 s after they were due (migration 0013's started_at).
BUILD = """
INSERT INTO jobs (kind, payload, status, attempts, max_attempts, run_at, created_at,
                  finished_at, last_error, unique_key, locked_until, started_at)
SELECT 'kind_' || (i %% %(kinds)s),
       jsonb_build_object('user_id', i %% 100000, 'n', i, 'token', 'secret'),
       s.status,
       CASE WHEN s.status = 'failed' THEN 3 WHEN s.status = 'done' THEN 1 ELSE 0 END,
       3,
       CASE WHEN s.status = 'pending' AND i %% 100 >= 7 THEN now() + (i %% 3600) * interval '1 s'
            ELSE t.created END,
       t.created,
       CASE WHEN s.status IN ('done', 'failed') THEN t.created + interval '2 s' END,
       CASE WHEN s.status = 'failed' THEN
            (ARRAY['ValueError: bad input for order ', 'TimeoutError: call took ',
                   'KeyError: missing field '])[1 + i %% 3] || (i %% 977)
            || E'\\nTraceback (most recent call last):\\n  File "app.py", line 12' END,
       CASE WHEN i %% 50 = 0 THEN 'sched_' || (i %% 20) || '@' || i END,
       CASE WHEN s.status = 'running' THEN now() + interval '5 min' END,
       CASE WHEN s.status IN ('done', 'failed', 'running')
            THEN t.created + (i %% 20) * interval '50 ms' END
FROM generate_series(1, %(rows)s) AS i,
     LATERAL (SELECT now() - interval '7 days' * (1 - i::float8 / %(rows)s) AS created) AS t,
     LATERAL (SELECT CASE WHEN i %% 100 < 4 THEN 'failed'
                          WHEN i %% 100 < 9 AND i > %(rows)s - 400000 THEN 'pending'
                          WHEN i %% 100 = 9 AND i > %(rows)s - 100000 THEN 'running'
                          ELSE 'done' END AS status) AS s
"""

# The attempts of every failed job (three each: two retries, then the failure), with their
# durations, as the workers record them; a successful attempt leaves no row.
ATTEMPTS = """
INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome, finished_at, duration_s, worker)
SELECT j.id, a.n, CASE WHEN a.n < 3 THEN 'retry' ELSE 'failed' END,
       j.finished_at - (3 - a.n) * interval '1 s', 0.05 + (j.id % 40) * 0.05 * a.n,
       'bench-worker'
FROM jobs AS j, generate_series(1, 3) AS a(n)
WHERE j.status = 'failed'
"""

ZONES = ("UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Sydney")
SCHEDULE_COUNT = 100
HISTORY_DAYS = 30
# The last 30 days of each schedule's hourly periods, as the scheduler replicas record them:
# mostly enqueued (jobs of the table above), a few skipped and missed.
HISTORY = """
INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, reason, job_id, inserted_at,
                                     inserted_by)
SELECT s.name, h.fire_at,
       CASE WHEN h.n %% 97 = 0 THEN 'missed' WHEN h.n %% 89 = 0 THEN 'skipped' ELSE 'enqueued' END,
       CASE WHEN h.n %% 97 = 0 THEN 'catch_up latest' WHEN h.n %% 89 = 0 THEN 'paused' END,
       CASE WHEN h.n %% 97 <> 0 AND h.n %% 89 <> 0 THEN 1 + (h.n * 7919 + s.i) %% %(rows)s END,
       h.fire_at + interval '150 ms', 'bench-replica-' || (h.n %% 3)
FROM (SELECT name, row_number() OVER (ORDER BY name) AS i FROM pgbeat_schedules) AS s,
     LATERAL (SELECT n, date_trunc('hour', now()) - n * interval '1 hour' AS fire_at
              FROM generate_series(0, %(hours)s) AS n) AS h
ON CONFLICT DO NOTHING
"""


def schedules_text() -> str:
    """100 hourly-or-daily schedules across five zones."""
    parts = []
    for n in range(SCHEDULE_COUNT):
        cron = "0 * * * *" if n % 4 else f"{n % 60} {n % 24} * * *"
        parts.append(
            f'[schedules.sched_{n:03d}]\ncron = "{cron}"\ntimezone = "{ZONES[n % len(ZONES)]}"\n'
            f'kind = "kind_{n}"\n'
        )
    return "\n".join(parts)


SCHEDULES = schedules_text()


def build(url: str, rows: int) -> None:
    """Create the database and its rows unless a complete one is already there."""
    admin = admin_url()
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
        ).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    with psycopg.connect(url, autocommit=True) as conn:
        apply_migrations(conn)
        sync_file(conn, parse_schedules(SCHEDULES), replica="bench-replica-0")
        history = conn.execute("SELECT count(*) FROM pgbeat_schedule_history").fetchone()
        if not history or history[0] == 0:
            hours = HISTORY_DAYS * 24
            conn.execute(HISTORY, {"rows": rows, "hours": hours})
        have = conn.execute("SELECT count(*) FROM jobs").fetchone()
        timed = conn.execute(  # a table built before started_at (0013) is built again
            "SELECT 1 FROM jobs WHERE status = 'done' AND started_at IS NOT NULL LIMIT 1"
        ).fetchone()
        if have and have[0] == rows and timed:
            attempts = conn.execute("SELECT 1 FROM pgbeat_job_attempts LIMIT 1").fetchone()
            if attempts is None:
                conn.execute(ATTEMPTS)
                conn.execute("VACUUM ANALYZE pgbeat_job_attempts")
            return
        print(f"building {rows:,} jobs in {DATABASE} (a few minutes) ...", file=sys.stderr)
        started = time.monotonic()
        conn.execute("TRUNCATE jobs RESTART IDENTITY")
        conn.execute(BUILD, {"rows": rows, "kinds": KINDS})
        conn.execute("TRUNCATE pgbeat_job_attempts")
        conn.execute(ATTEMPTS)
        conn.execute("VACUUM ANALYZE jobs, pgbeat_job_attempts")
        print(f"built in {time.monotonic() - started:.0f} s", file=sys.stderr)


# The requests of the page's own live refresh (pgbeat.js), which skip what it does not redraw.
HEADERS = {"overview, live refresh": {"X-Pgbeat-Live": "1"}}


def pages(url: str) -> list[tuple[str, str]]:
    """(label, path) of every page measured, with ids taken from the data."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT max(id) FROM jobs WHERE status = 'failed'").fetchone()
    failed_id = int(row[0]) if row and row[0] else 1
    payload = quote(json.dumps({"user_id": 4242}))
    group = "status=failed&kind=kind_7&signature=" + quote("KeyError: missing field N")
    return [
        ("overview", "/"),
        ("overview, live refresh", "/"),
        ("jobs, all", "/jobs"),
        ("jobs, page 2", f"/jobs?before={failed_id}"),
        ("jobs, failed", "/jobs?status=failed"),
        ("jobs, pending", "/jobs?status=pending"),
        ("jobs, running", "/jobs?status=running"),
        ("jobs, done", "/jobs?status=done"),
        ("jobs, kind", "/jobs?kind=kind_7"),
        ("jobs, failed + kind", "/jobs?status=failed&kind=kind_7"),
        ("jobs, payload", f"/jobs?payload={payload}"),
        ("jobs, failed + payload", f"/jobs?status=failed&payload={payload}"),
        ("jobs, error text", "/jobs?status=failed&error=order%20812"),
        ("jobs, schedule", "/jobs?schedule=sched_001"),
        ("job detail", f"/jobs/{failed_id}"),
        ("confirm retry (failed + kind)", "/jobs/confirm?status=failed&kind=kind_7&action=retry"),
        ("failure group's jobs", "/jobs?" + group),
        ("confirm retry (failure group)", "/jobs/confirm?action=retry&" + group),
        (
            "confirm retry (failed + payload)",
            f"/jobs/confirm?status=failed&payload={payload}&action=retry",
        ),
        ("failures 1h", "/failures?window=1h"),
        ("failures 24h", "/failures?window=24h"),
        ("failures 7d", "/failures?window=7d"),
        ("performance 1h", "/performance?window=1h"),
        ("performance 24h", "/performance?window=24h"),
        ("performance 7d", "/performance?window=7d"),
        ("performance 7d, by p95", "/performance?window=7d&sort=duration_p95"),
        ("performance of a kind, 24h", "/performance/kind_7?window=24h"),
        ("performance of a kind, 7d", "/performance/kind_7?window=7d"),
        ("processes", "/processes"),
        ("schedules", "/schedules"),
        ("schedule detail", "/schedules/sched_001"),
        ("schedule detail, DST preview", "/schedules/sched_002?from=2027-03-27&n=50"),
    ]


class Server:
    """The dashboard under uvicorn on a free port, in a thread of this process."""

    def __init__(self, url: str, schedules: Path) -> None:
        del schedules  # synced into pgbeat_schedules by build(): the dashboard reads them there
        app = create_app(url)
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *_: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def backend_cpu(url: str) -> float:
    """CPU seconds used so far by the dashboard's backends (application_name pgbeat-ui)."""
    with psycopg.connect(url, autocommit=True) as conn:
        pids = [
            r[0]
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbeat-ui'"
            )
        ]
    return sum(machine.process_cpu(pid)[1] for pid in pids)


def measure(url: str, repeat: int, only: str | None = None) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory() as folder:
        schedules = Path(folder) / "schedules.toml"
        schedules.write_text(SCHEDULES)
        with Server(url, schedules) as base, httpx.Client(base_url=base, timeout=30) as client:
            client.get("/").raise_for_status()  # opens the pool
            for label, path in pages(url):
                if only and only not in label:
                    continue
                headers = HEADERS.get(label)
                client.get(path, headers=headers).raise_for_status()  # warm the cache
                cpu_before = backend_cpu(url)
                times = []
                for _ in range(repeat):
                    started = time.perf_counter()
                    response = client.get(path, headers=headers)
                    times.append((time.perf_counter() - started) * 1000)
                    response.raise_for_status()
                cpu_ms = (backend_cpu(url) - cpu_before) / repeat * 1000
                results.append(
                    {
                        "page": label,
                        "path": path,
                        "median_ms": statistics.median(times),
                        "max_ms": max(times),
                        "db_cpu_ms": cpu_ms,
                    }
                )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ui_bench", description=__doc__)
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--only", help="measure only the pages whose label contains this")
    args = parser.parse_args(argv)
    url = with_database(admin_url(), DATABASE)
    build(url, args.rows)
    results = measure(url, args.repeat, args.only)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'page':<32} {'median':>9} {'max':>9} {'DB CPU':>9}")
    for r in results:
        flag = "" if r["median_ms"] < TARGET_MS else "  over target"
        print(
            f"{r['page']:<32} {r['median_ms']:>7.1f}ms {r['max_ms']:>7.1f}ms "
            f"{r['db_cpu_ms']:>7.1f}ms{flag}"
        )
    by_page = {r["page"]: r for r in results}
    overview = by_page.get("overview, live refresh", by_page.get("overview"))  # a refresh
    if overview is None:
        return 0
    per_minute = overview["db_cpu_ms"] * 12
    print(
        f"\nan open overview refreshing every 5 s: {per_minute:.0f} ms of database CPU per "
        f"minute ({per_minute / 600:.2f} % of one core)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
