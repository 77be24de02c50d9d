"""A real dashboard for tests: uvicorn serving ``create_app`` on a free port, in a thread.

Also the data the dashboard tests share: a schedules file with a New York daily job and an
interval job, and a few jobs in every status.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import uvicorn
from anyio import open_file  # noqa: F401  (loaded here: see below)

from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.sync import sync_file
from pgbeat.ui import UiSettings, create_app
from tests.helpers import temporary_database

# anyio loads open_file's module on first use, and pytest rewrites anyio's modules (anyio is a
# pytest plugin). Left to the first static file the dashboard serves, that compile ran in the
# server's thread beside the test's and failed at times on Python 3.11 ("SystemError: AST
# constructor recursion depth mismatch"): importing it here does it once, at collection.
REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"  # Debian's build: browser downloads are not possible here
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# axe-core, installed by `npm ci --prefix tests/browser` (.ci/run does it).
AXE = REPO_ROOT / "tests" / "browser" / "node_modules" / "axe-core" / "axe.min.js"
ADMIN_TOKEN = "admin-token-0123456789abcdef"
VIEWER_TOKEN = "viewer-token-0123456789abcdef"

SCHEDULES = """
[schedules.nightly_report]
cron = "30 2 * * *"
timezone = "America/New_York"
kind = "report"
payload = { format = "pdf" }

[schedules.heartbeat]
every = "1m"
kind = "beat"
"""


def write_schedules(folder: Path, extra: str = "") -> Path:
    path = folder / "schedules.toml"
    path.write_text(SCHEDULES + extra)
    return path


def sync_schedules(url: str, path: Path) -> None:
    """Put the file's schedules in pgbeat_schedules, as a scheduler replica does on start."""
    with psycopg.connect(url, autocommit=True) as conn:
        sync_file(conn, load_schedules(path), replica="test-replica")


def seed_jobs(conn: psycopg.Connection[Any]) -> None:
    """Jobs in every status; failed ones of two kinds, some with a tenant in their payload."""
    conn.execute(
        """
        INSERT INTO jobs (kind, payload, status, attempts, last_error, finished_at, run_at)
        SELECT CASE WHEN i % 2 = 0 THEN 'email' ELSE 'invoice' END,
               jsonb_build_object('tenant', CASE WHEN i % 3 = 0 THEN 'acme' ELSE 'globex' END,
                                  'n', i, 'api_key', 'sk-live-' || i),
               CASE WHEN i <= 12 THEN 'failed' WHEN i <= 16 THEN 'done' ELSE 'pending' END,
               CASE WHEN i <= 16 THEN 1 ELSE 0 END,
               CASE WHEN i <= 12 THEN 'ValueError: no mailbox ' || i END,
               CASE WHEN i <= 16 THEN now() - i * interval '1 minute' END,
               now() + CASE WHEN i > 18 THEN interval '1 hour' ELSE interval '0' END
        FROM generate_series(1, 20) AS i
        """
    )


# An hour and a day of work for the charts and the performance view: three kinds finishing
# every minute or so (each job's last run started between its due time and its finish), a
# few retries and failures with the attempts the workers record, the heartbeat schedule's
# last 40 periods (a failure, a skip and a miss among them), one worker and two schedulers
# registered: one holding the file in effect (seeded after the file's sync), one an older
# file.
ACTIVITY = """
INSERT INTO jobs (kind, payload, status, attempts, run_at, created_at, finished_at, last_error,
                  started_at)
SELECT k.kind, jsonb_build_object('n', i),
       CASE WHEN i % k.fail_every = 0 THEN 'failed' ELSE 'done' END,
       CASE WHEN i % k.fail_every = 0 THEN 3 WHEN i % 7 = 0 THEN 2 ELSE 1 END,
       t.at - k.wait, t.at - k.wait, t.at + (i % 5) * interval '1 s',
       CASE WHEN i % k.fail_every = 0 THEN 'TimeoutError: upstream took ' || (i % 40) || 's' END,
       t.at - k.wait * (i % 4) / 8
FROM (VALUES ('send_email', 9, interval '2 s'), ('build_report', 13, interval '40 s'),
             ('sync_crm', 23, interval '5 s')) AS k(kind, fail_every, wait),
     generate_series(1, 600) AS i,
     LATERAL (SELECT now() - (i * interval '144 s') * (1 + length(k.kind) % 3) / 3 AS at) AS t;
INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome, finished_at, duration_s, worker)
SELECT j.id, a.n, CASE WHEN a.n < j.attempts OR j.status = 'done' THEN 'retry' ELSE 'failed' END,
       j.finished_at - (j.attempts - a.n) * interval '2 s',
       0.2 + (j.id % 17) * 0.15 * a.n + CASE WHEN j.kind = 'build_report' THEN 4 ELSE 0 END,
       'web-1:4242'
FROM jobs AS j, generate_series(1, 3) AS a(n)
WHERE j.kind IN ('send_email', 'build_report', 'sync_crm')
  AND (a.n < j.attempts OR (j.status = 'failed' AND a.n = j.attempts));
WITH periods AS (
    SELECT n, date_trunc('minute', now()) - n * interval '1 minute' AS fire_at
    FROM generate_series(1, 40) AS n
), beats AS (
    INSERT INTO jobs (kind, payload, status, attempts, run_at, created_at, finished_at,
                      unique_key, last_error, started_at)
    SELECT 'beat', '{}', CASE WHEN n % 13 = 5 THEN 'failed' ELSE 'done' END, 1, fire_at,
           fire_at + interval '120 ms', fire_at + interval '1 s',
           'heartbeat@' || to_char(fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
           CASE WHEN n % 13 = 5 THEN 'ConnectionError: ping failed' END,
           fire_at + interval '300 ms'
    FROM periods WHERE n % 17 <> 8 AND n % 19 <> 4
    RETURNING id, run_at
)
INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, reason, job_id, inserted_at,
                                     inserted_by)
SELECT 'heartbeat', p.fire_at,
       CASE WHEN b.id IS NOT NULL THEN 'enqueued' WHEN p.n % 17 = 8 THEN 'skipped'
            ELSE 'missed' END,
       CASE WHEN p.n % 17 = 8 THEN 'paused' WHEN b.id IS NULL THEN 'catch_up latest' END,
       b.id, p.fire_at + interval '120 ms', 'web-1:4100'
FROM periods AS p LEFT JOIN beats AS b ON b.run_at = p.fire_at
ON CONFLICT DO NOTHING;
INSERT INTO pgbeat_schedule_files (hash, first_seen_by, applied_at, applied_by, schedules)
VALUES ('5f2c9e0a7b1d4e3f', 'web-1:4100', now() - interval '2 hours', 'web-1:4100',
        '{nightly_report,heartbeat}'),
       ('0b7a3c2d1e9f8a6b', 'web-2:4101', NULL, NULL, '{nightly_report}')
ON CONFLICT DO NOTHING;
INSERT INTO pgbeat_processes (id, role, host, pid, version, schedules_hash, details) VALUES
  ('web-1:4242', 'worker', 'web-1', 4242, '0.9.0', NULL,
   '{"concurrency": 10, "kinds": ["send_email", "build_report", "sync_crm"],
     "queues": ["default", "mail"], "running": 3, "lease_s": 30, "timeout_s": 25}'),
  ('web-1:4100', 'scheduler', 'web-1', 4100, '0.9.0',
   coalesce((SELECT hash FROM pgbeat_schedule_files WHERE applied_at IS NOT NULL
             ORDER BY applied_at DESC LIMIT 1), '5f2c9e0a7b1d4e3f'), '{}'),
  ('web-2:4101', 'scheduler', 'web-2', 4101, '0.9.0', '0b7a3c2d1e9f8a6b', '{}')
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now();
"""


def seed_activity(conn: psycopg.Connection[Any]) -> None:
    """ACTIVITY: finished jobs with attempts, and registered processes (beating now)."""
    conn.execute(ACTIVITY)


class Dashboard:
    """``create_app(settings)`` served by uvicorn on 127.0.0.1 and a free port."""

    def __init__(self, settings: UiSettings) -> None:
        self.settings = settings
        config = uvicorn.Config(
            create_app(settings=settings), host="127.0.0.1", port=0, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.origin = ""

    @property
    def url(self) -> str:
        """The dashboard's home, prefix included."""
        return f"{self.origin}{self.settings.prefix}"

    def start(self) -> Dashboard:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise AssertionError("the dashboard did not start")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.origin = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


@contextmanager
def dashboard(database_url: str, **options: Any) -> Iterator[Dashboard]:
    """A running dashboard on ``database_url``; ``options`` are ``UiSettings`` fields."""
    running = Dashboard(UiSettings(database_url=database_url, **options)).start()
    try:
        yield running
    finally:
        running.stop()


@contextmanager
def activity_dashboard(database_url: str) -> Iterator[Dashboard]:
    """The dashboard of ``database_url`` with ACTIVITY's rows added, for the admin and the
    viewer tokens, with no live refresh (nothing swaps regions while a browser reads them)."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        seed_activity(conn)
    options = {"token": ADMIN_TOKEN, "viewer_token": VIEWER_TOKEN, "refresh_seconds": 0}
    with dashboard(database_url, **options) as running:
        yield running


@contextmanager
def fresh_database(server_url: str, template: str) -> Iterator[str]:
    """A database cloned from the migrated template, for a whole test module."""
    with temporary_database(server_url, template, prefix="pgbeat_ui") as url:
        yield url
