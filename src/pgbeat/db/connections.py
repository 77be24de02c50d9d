"""Connections: opening them, a handlers' pool, psycopg errors as pgbeat's (an outage, or
a statement's own values refused), and the one reconnect loop of every long-running loop.

Which database to use is db/urls.py's.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import psycopg
import psycopg_pool

from pgbeat.backoff import reconnect_delay
from pgbeat.db.pooler import connection_options, session_options
from pgbeat.db.sql import session as session_sql
from pgbeat.db.urls import redact, scrub
from pgbeat.errors import DatabaseUnavailable

log = logging.getLogger("pgbeat.db")
T = TypeVar("T")


def connect(url: str, *, autocommit: bool = True, timeout: float = 5.0) -> psycopg.Connection[Any]:
    """Open one connection, or raise ``DatabaseUnavailable`` with a one-line reason."""
    try:
        return psycopg.connect(
            url,
            autocommit=autocommit,
            connect_timeout=max(1, round(timeout)),
            **connection_options(url),
        )
    except psycopg.Error as exc:
        raise DatabaseUnavailable(describe_failure(exc, url)) from None


def describe_failure(exc: BaseException, url: str) -> str:
    """A one-line, password-free description of a database failure."""
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"database unavailable ({redact(url)}): {scrub(first_line, url)}"


def make_pool(
    url: str, *, max_size: int = 2, name: str = "pgbeat"
) -> psycopg_pool.ConnectionPool[Any]:
    """A small autocommit pool that replaces connections the server has dropped.

    Take its connections with ``checked_connection``, which checks each one first.
    """
    return psycopg_pool.ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        # application_name: visible in pg_stat_activity
        kwargs={"autocommit": True, "application_name": name, **connection_options(url)},
        name=name,
        open=False,
    )


@contextlib.contextmanager
def checked_connection(
    pool: psycopg_pool.ConnectionPool[Any], timeout: float
) -> Iterator[psycopg.Connection[Any]]:
    """A pooled connection that answered an empty query, within ``timeout`` seconds.

    The pool's own ``check`` waits 1, 2, 4, 8, 16 s between connections that fail it, so
    when backends keep being terminated (a failover, an operator's kill) one waiting
    handler passes its whole timeout asleep while fresh connections sit in the pool. The
    wait here grows to 0.5 s at most; a broken connection given back is replaced by the
    pool.
    """
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        conn = pool.getconn(timeout=max(0.001, deadline - time.monotonic()))
        try:
            conn.execute("")
            break
        except psycopg.Error:
            pool.putconn(conn)
            if time.monotonic() + delay >= deadline:
                raise psycopg_pool.PoolTimeout(
                    f"couldn't get a working connection after {timeout:.2f} sec"
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    try:
        with conn:
            yield conn
    finally:
        pool.putconn(conn)


@contextlib.contextmanager
def translated_errors(url: str) -> Iterator[None]:
    """Turn connection-level psycopg failures into ``DatabaseUnavailable``."""
    try:
        yield
    except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        if not is_connection_failure(exc):
            raise
        raise DatabaseUnavailable(describe_failure(exc, url)) from None


# SQLSTATE classes that describe the server or the link, not the statement: connection
# exception, insufficient resources (disk full, out of memory, too many connections),
# operator intervention (admin shutdown, crash recovery, cancel) and system error.
_OUTAGE_CLASSES = ("08", "53", "57", "58")
# A standby, or a demoted primary after a failover, refuses writes until we reach the primary.
_OUTAGE_CODES = frozenset({"25006"})


def is_connection_failure(exc: BaseException, conn: psycopg.Connection[Any] | None = None) -> bool:
    """True when ``exc`` means the database (not this statement) failed: reconnect and retry.

    Decided from the connection's state and the error's SQLSTATE class, not its Python
    class: psycopg files "index row too large" (54000) under OperationalError, and
    treating that as an outage would retry a statement that can never succeed.
    """
    if isinstance(exc, DatabaseUnavailable | psycopg_pool.PoolTimeout):
        return True
    if not isinstance(exc, psycopg.Error) or isinstance(exc, psycopg.errors.PipelineAborted):
        return False
    if conn is not None and (conn.broken or conn.closed):
        return True
    if exc.sqlstate is None:  # raised by libpq itself: no reply from the server
        return isinstance(exc, psycopg.OperationalError)
    return exc.sqlstate.startswith(_OUTAGE_CLASSES) or exc.sqlstate in _OUTAGE_CODES


# Data exception (a value out of range, bad text), integrity constraint violation, program
# limit exceeded (an index row too large): the values sent were refused, not the statement.
_DATA_CLASSES = ("22", "23", "54")


def is_data_error(exc: BaseException) -> bool:
    """True when the database (or psycopg, before sending) refused the values of a statement.

    Such an error belongs to the row that carries those values; any other one (a missing
    table, a missing privilege) would fail every row alike.
    """
    if isinstance(exc, UnicodeEncodeError):
        return True
    if not isinstance(exc, psycopg.Error):
        return False
    if exc.sqlstate is None:  # refused by psycopg itself (a NUL in a text value)
        return isinstance(exc, psycopg.DataError)
    return exc.sqlstate.startswith(_DATA_CLASSES)


class ReconnectBackoff:
    """Tracks a run of connection failures: one log line when it starts, one when it ends.

    ``failed`` returns how long to wait before the next try (backoff.reconnect_delay:
    exponential, at most 10 s, +/-10 % jitter so a fleet does not reconnect in lockstep).
    """

    def __init__(
        self,
        url: str,
        logger: logging.Logger,
        on_recovered: Callable[[], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._url = url
        self._log = logger
        self._on_recovered = on_recovered
        self._rng = rng or random.Random()
        self.failures = 0

    def failed(self, exc: BaseException) -> float:
        self.failures += 1
        if self.failures == 1:
            self._log.warning("%s; retrying with backoff", describe_failure(exc, self._url))
        return reconnect_delay(self.failures, self._rng.uniform(-1.0, 1.0))

    def succeeded(self) -> None:
        if self.failures:
            self._log.warning("database reachable again after %d failed attempts", self.failures)
            self.failures = 0
            if self._on_recovered is not None:
                self._on_recovered()


@dataclass(frozen=True)
class Outage:
    """The database could not be used; try again after ``pause`` seconds."""

    pause: float


class Connector:
    """One connection for a single loop, opened on demand and dropped after a failure.

    ``run(work)`` is the one reconnect loop of pgbeat: it runs ``work`` on the connection,
    and when the database fails it drops the connection and returns an ``Outage`` with
    the backoff to wait; any other error is the caller's and propagates. Connectors may
    share one ``backoff`` so that one outage is logged once, not once per connection.

    A loop that owns its connection skips the pool's per-checkout health query: on the
    worker's hot path that query would cost one round trip per claim.
    """

    def __init__(
        self,
        url: str,
        application_name: str,
        *,
        configure: Callable[[psycopg.Connection[Any]], None] | None = None,
        backoff: ReconnectBackoff | None = None,
        **settings: str,
    ) -> None:
        self._url = url
        self._application_name = application_name
        self._configure = configure
        self.backoff = backoff or ReconnectBackoff(url, log)
        self._options = session_options(url, settings)  # none behind a pooler
        self._conn: psycopg.Connection[Any] | None = None
        self.opened = 0  # connections opened so far: a new number means a reconnect

    def get(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=5,
                application_name=self._application_name,
                options=self._options,
                **connection_options(self._url),
            )
            self.opened += 1
            if self._configure is not None:
                self._configure(self._conn)
        return self._conn

    def run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T | Outage:
        """``work(conn)``'s result, or an ``Outage`` when the database failed under it.

        Failing to connect is always an outage; an error from ``work`` is one only when
        ``is_connection_failure`` says so, and otherwise propagates.
        """
        try:
            conn = self.get()
        except psycopg.OperationalError as exc:
            return self.failed(exc)
        try:
            result = work(conn)
        except Exception as exc:
            if not is_connection_failure(exc, conn):
                raise
            return self.failed(exc)
        self.backoff.succeeded()
        return result

    def failed(self, exc: BaseException) -> Outage:
        """Count a failure of the database: drop the connection, return the pause."""
        self.discard()
        return Outage(self.backoff.failed(exc))

    def discard(self) -> None:
        """Close the connection after a failure; the next ``get`` opens a new one."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        self.discard()


def database_now(conn: psycopg.Connection[Any]) -> datetime:
    """The database's clock."""
    row = conn.execute(session_sql.DATABASE_NOW).fetchone()
    assert row is not None
    now: datetime = row[0]
    return now
