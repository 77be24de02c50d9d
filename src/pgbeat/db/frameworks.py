"""The psycopg connection behind an application's SQLAlchemy session or Django connection.

``pgbeat.enqueue`` runs its statement on the connection that holds the caller's transaction,
so that a job commits or rolls back with the business write. Neither framework is imported
here: an object can only be one of theirs once its framework is loaded, so each check looks
in ``sys.modules`` first, and ``import pgbeat`` never loads either.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable
from typing import Any, Protocol

import psycopg

_EXPECTED = (
    "a psycopg connection, a SQLAlchemy Session, Connection, AsyncSession or AsyncConnection "
    "(psycopg dialect), or a Django connection (psycopg 3 backend)"
)


def sync_connection(conn: object) -> psycopg.Connection[Any] | None:
    """The psycopg connection in ``conn``'s current transaction; None when ``conn`` is async.

    A SQLAlchemy ``Connection`` that has not begun a transaction begins one, as its next
    statement would (autobegin): the job then commits with ``conn.commit()``. A Django
    connection joins the ``transaction.atomic()`` block it is in; outside one it is in
    autocommit, and the job commits at once, like Django's own queries.
    """
    if isinstance(conn, psycopg.Connection):
        return conn
    if isinstance(conn, psycopg.AsyncConnection) or _is_async_sqlalchemy(conn):
        return None
    sqlalchemy = _sqlalchemy_connection(conn)
    if sqlalchemy is not None:
        if not sqlalchemy.in_transaction():
            sqlalchemy.begin()
        return _sync_driver(sqlalchemy.connection.driver_connection)
    django = _django_connection(conn)
    if django is not None:
        return django
    raise TypeError(f"pgbeat needs {_EXPECTED}; got {_type_name(conn)}")


async def async_connection(conn: object) -> psycopg.AsyncConnection[Any]:
    """The psycopg ``AsyncConnection`` in ``conn``'s current transaction.

    ``conn`` is a psycopg ``AsyncConnection``, or a SQLAlchemy ``AsyncSession``,
    ``async_scoped_session`` or ``AsyncConnection`` on the ``postgresql+psycopg`` dialect;
    an ``AsyncConnection`` that has not begun a transaction begins one (autobegin).
    """
    if isinstance(conn, psycopg.AsyncConnection):
        return conn
    if not _is_async_sqlalchemy(conn):
        raise TypeError(f"pgbeat needs an async connection ({_EXPECTED}); got {_type_name(conn)}")
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_scoped_session

    if isinstance(conn, async_scoped_session):
        conn = conn()
    if isinstance(conn, AsyncSession):
        conn = await conn.connection()
    assert isinstance(conn, AsyncConnection)
    if not conn.in_transaction():
        await conn.begin()
    raw = await conn.get_raw_connection()
    return _async_driver(raw.driver_connection)


def _is_async_sqlalchemy(conn: object) -> bool:
    if "sqlalchemy.ext.asyncio" not in sys.modules:
        return False
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_scoped_session

    return isinstance(conn, AsyncSession | AsyncConnection | async_scoped_session)


def _sqlalchemy_connection(conn: object) -> Any:
    """A SQLAlchemy ``Connection`` for a Session, scoped_session or Connection; else None."""
    if "sqlalchemy" not in sys.modules:
        return None
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session, scoped_session

    if isinstance(conn, scoped_session):  # Flask-SQLAlchemy's db.session is one
        conn = conn()
    if isinstance(conn, Session):
        return conn.connection()  # begins the session's transaction if none is open
    return conn if isinstance(conn, Connection) else None


def _django_connection(conn: object) -> psycopg.Connection[Any] | None:
    """The psycopg connection of Django's ``connection`` (or ``connections[alias]``); else None."""
    if "django" not in sys.modules or not any(
        cls.__module__.startswith("django.") for cls in type(conn).__mro__
    ):
        return None
    if getattr(conn, "vendor", None) != "postgresql":
        raise TypeError(f"pgbeat needs a PostgreSQL database; this Django connection is {conn!r}")
    conn.ensure_connection()  # type: ignore[attr-defined]
    return _sync_driver(conn.connection)  # type: ignore[attr-defined]


def _sync_driver(found: object) -> psycopg.Connection[Any]:
    if isinstance(found, psycopg.Connection):
        return found
    raise _wrong_driver(found)


def _async_driver(found: object) -> psycopg.AsyncConnection[Any]:
    if isinstance(found, psycopg.AsyncConnection):
        return found
    raise _wrong_driver(found)


def _wrong_driver(found: object) -> TypeError:
    """Why a framework's connection cannot be used: a sync view of an async one, or psycopg2."""
    if isinstance(found, psycopg.AsyncConnection):
        return TypeError(
            "this connection belongs to an async engine: use its AsyncConnection or "
            "AsyncSession with `await pgbeat.enqueue(...)`"
        )
    return TypeError(
        f"pgbeat needs the psycopg 3 driver (postgresql+psycopg:// for SQLAlchemy; psycopg, "
        f"not psycopg2, for Django); this connection uses {_type_name(found)}"
    )


def _type_name(value: object) -> str:
    cls = type(value)
    return f"{cls.__module__}.{cls.__qualname__}"


class SyncCaller(Protocol):
    """For type checkers: a connection whose ``commit()`` returns at once.

    psycopg's ``Connection``, SQLAlchemy's ``Session`` and ``Connection``, Django's
    connection. The public calls' overloads match on ``commit`` rather than on classes, so
    a ``psycopg.Connection[Any]`` still selects one overload and a precise return type.
    """

    def commit(self) -> None: ...


class AsyncCaller(Protocol):
    """For type checkers: a connection whose ``commit()`` is awaited (psycopg's
    ``AsyncConnection``, SQLAlchemy's ``AsyncSession`` and ``AsyncConnection``)."""

    def commit(self) -> Awaitable[None]: ...
