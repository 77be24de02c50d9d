"""The dashboard's own connection pool: at most two connections, every query under a timeout.

With ``--replica-url`` a second pool on a standby serves the pages (GET and HEAD), and the
actions (POST) always use the primary's: a standby never sees a write, and the primary
spends nothing on browsing.

Behind a transaction pooler (``PGBEAT_POOLER=transaction``) the timeout is set per page, in
the page's transaction, since startup options and session settings do not survive pooling.
Statements are never prepared: PostgreSQL then plans each with its actual values, so the
optional filters of ``db/sql/jobs/dashboard.py`` (``%(x)s IS NULL OR ...``) fold away instead of
ending in a generic plan that scans everything.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg_pool
from starlette.types import ASGIApp, Receive, Scope, Send

from pgbeat.db import pooler, schemas
from pgbeat.db.sql import session as session_sql
from pgbeat.ui.settings import UiSettings

CONNECT_TIMEOUT = 5.0


# True while the dashboard serves a page (GET or HEAD), never an action: set by app.py's
# PageReads. Pages then read from the standby of --replica-url, if there is one.
reading: contextvars.ContextVar[bool] = contextvars.ContextVar("pgbeat_ui_reading", default=False)


class Store:
    """A small pool for the dashboard, opened with the app or on its first page, then closed;
    with ``replica_url``, a second one on a standby for the pages (actions use the primary)."""

    def __init__(self, settings: UiSettings) -> None:
        self._timeout_ms = settings.statement_timeout_ms
        # Behind a transaction pooler no session is ours to configure: each page's queries
        # then run in one transaction that sets the timeout locally (see connection()).
        self._pooled = pooler.pooler() is not None
        self._pool = self._make_pool(settings.database_url, settings.pool_size, "pgbeat-ui")
        self._replica = None
        if settings.replica_url:
            self._replica = self._make_pool(
                settings.replica_url, settings.pool_size, "pgbeat-ui-replica"
            )
        self._lock = threading.Lock()
        self._opened = False
        self.schema: str | None = None  # the schema it serves, read on the first connection

    def _make_pool(self, url: str, size: int, name: str) -> psycopg_pool.ConnectionPool[Any]:
        return psycopg_pool.ConnectionPool(
            url,
            min_size=1,
            max_size=size,
            kwargs={
                **pooler.connection_options(url),
                "autocommit": True,
                "application_name": name,
                "options": pooler.session_options(
                    url, {"statement_timeout": str(self._timeout_ms)}
                ),
                "prepare_threshold": None,
                "connect_timeout": 5,
            },
            timeout=CONNECT_TIMEOUT,
            name=name,
            open=False,
        )

    def open(self) -> None:
        """Start the pools (the app's lifespan does; else the first page does)."""
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                if self._replica is not None:
                    self._replica.open(wait=False)
                self._opened = True

    def close(self) -> None:
        with self._lock:
            self._pool.close()
            if self._replica is not None:
                self._replica.close()
            self._opened = True  # a closed pool stays closed: psycopg_pool cannot reopen it

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """One pooled connection for the few queries of one page (the standby's for a page
        when there is one, the primary's for an action).

        A mounted app gets no lifespan events of its own (Starlette runs only the outer
        app's), so the pools open on the first page if nothing opened them before.
        """
        if not self._opened:
            self.open()
        pool = self._replica if self._replica is not None and reading.get() else self._pool
        with pool.connection() as conn:
            if self.schema is None:
                self.schema = schemas.current_schema(conn)
            if not self._pooled:
                yield conn
                return
            with conn.transaction():
                conn.execute(session_sql.UI_STATEMENT_TIMEOUT_LOCAL, {"ms": str(self._timeout_ms)})
                yield conn


class PageReads:
    """ASGI middleware: a GET or HEAD is a page, and its queries may go to the standby."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        page = scope["type"] == "http" and scope.get("method") in ("GET", "HEAD")
        token = reading.set(page)
        try:
            await self.app(scope, receive, send)
        finally:
            reading.reset(token)
