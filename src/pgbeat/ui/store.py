"""The dashboard's own connection pool: at most two connections, every query under a timeout.

Behind a transaction pooler (``PGBEAT_POOLER=transaction``) the timeout is set per page, in
the page's transaction, since startup options and session settings do not survive pooling.
Statements are never prepared: PostgreSQL then plans each with its actual values, so the
optional filters of ``db/ui_queries.py`` (``%(x)s IS NULL OR ...``) fold away instead of
ending in a generic plan that scans everything.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from pgbeat.db import pooler, ui_queries
from pgbeat.ui.settings import UiSettings

CONNECT_TIMEOUT = 5.0


class Store:
    """A small pool for the dashboard, opened with the app or on its first page, then closed."""

    def __init__(self, settings: UiSettings) -> None:
        url = settings.database_url
        self._timeout_ms = settings.statement_timeout_ms
        # Behind a transaction pooler no session is ours to configure: each page's queries
        # then run in one transaction that sets the timeout locally (see connection()).
        self._pooled = pooler.pooler() is not None
        self._pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=settings.pool_size,
            kwargs={
                **pooler.connection_options(url),
                "autocommit": True,
                "application_name": "pgbeat-ui",
                "options": pooler.session_options(
                    url, {"statement_timeout": str(self._timeout_ms)}
                ),
                "prepare_threshold": None,
                "connect_timeout": 5,
            },
            timeout=CONNECT_TIMEOUT,
            name="pgbeat-ui",
            open=False,
        )
        self._lock = threading.Lock()
        self._opened = False

    def open(self) -> None:
        """Start the pool (the app's lifespan does; else the first page does)."""
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True

    def close(self) -> None:
        with self._lock:
            self._pool.close()
            self._opened = True  # a closed pool stays closed: psycopg_pool cannot reopen it

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """One pooled connection for the few queries of one page.

        A mounted app gets no lifespan events of its own (Starlette runs only the outer
        app's), so the pool opens on the first page if nothing opened it before.
        """
        if not self._opened:
            self.open()
        with self._pool.connection() as conn:
            if not self._pooled:
                yield conn
                return
            with conn.transaction():
                conn.execute(ui_queries.UI_STATEMENT_TIMEOUT_LOCAL, {"ms": str(self._timeout_ms)})
                yield conn


def rows(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> list[dict[str, Any]]:
    """All rows of ``query`` as dicts."""
    with conn.cursor(row_factory=dict_row) as cursor:
        return cursor.execute(query, params).fetchall()


def one(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> dict[str, Any] | None:
    """The first row of ``query`` as a dict, or None."""
    with conn.cursor(row_factory=dict_row) as cursor:
        return cursor.execute(query, params).fetchone()
