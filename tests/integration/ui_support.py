"""A real dashboard for tests: uvicorn serving ``create_app`` on a free port, in a thread.

Also the data the dashboard tests share: a schedules file with a New York daily job and an
interval job, and a few jobs in every status.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import uvicorn
from anyio import open_file  # noqa: F401  (loaded here: see below)
from psycopg import sql

from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.sync import sync_file
from pgbeat.ui import UiSettings, create_app
from tests.conftest import with_database

# anyio loads open_file's module on first use, and pytest rewrites anyio's modules (anyio is a
# pytest plugin). Left to the first static file the dashboard serves, that compile ran in the
# server's thread beside the test's and failed at times on Python 3.11 ("SystemError: AST
# constructor recursion depth mismatch"): importing it here does it once, at collection.
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
def fresh_database(server_url: str, template: str) -> Iterator[str]:
    """A database cloned from the migrated template, for a whole test module."""
    name = f"pgbeat_ui_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    try:
        yield with_database(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
