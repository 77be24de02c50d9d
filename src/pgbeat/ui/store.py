"""The dashboard's own connection pool: at most two connections, every query under a timeout.

Statements are never prepared: PostgreSQL then plans each with its actual values, so the
optional filters of ``db/ui_queries.py`` (``%(x)s IS NULL OR ...``) fold away instead of
ending in a generic plan that scans everything.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from pgbeat.ui.settings import UiSettings

CONNECT_TIMEOUT = 5.0


class Store:
    """A small pool for the dashboard, opened with the app and closed with it."""

    def __init__(self, settings: UiSettings) -> None:
        theirs = ""
        with contextlib.suppress(psycopg.Error):
            theirs = str(
                psycopg.conninfo.conninfo_to_dict(settings.database_url).get("options") or ""
            )
        ours = f"-c statement_timeout={settings.statement_timeout_ms}"
        self._pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            settings.database_url,
            min_size=1,
            max_size=settings.pool_size,
            kwargs={
                "autocommit": True,
                "application_name": "pgbeat-ui",
                "options": f"{theirs} {ours}".strip(),
                "prepare_threshold": None,
                "connect_timeout": 5,
            },
            timeout=CONNECT_TIMEOUT,
            name="pgbeat-ui",
            open=False,
        )

    def open(self) -> None:
        self._pool.open(wait=False)

    def close(self) -> None:
        self._pool.close()

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """One pooled connection for the few queries of one page."""
        with self._pool.connection() as conn:
            yield conn


def rows(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> list[dict[str, Any]]:
    """All rows of ``query`` as dicts."""
    with conn.cursor(row_factory=dict_row) as cursor:
        return cursor.execute(query, params).fetchall()


def one(conn: psycopg.Connection[Any], query: Any, params: Any = None) -> dict[str, Any] | None:
    """The first row of ``query`` as a dict, or None."""
    with conn.cursor(row_factory=dict_row) as cursor:
        return cursor.execute(query, params).fetchone()
