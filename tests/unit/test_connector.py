"""Outage or error: the one reconnect rule (is_connection_failure) and Connector.run."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import psycopg
import psycopg_pool
import pytest

from pgbeat.db.connections import Connector, Outage, is_connection_failure, is_data_error
from pgbeat.errors import DatabaseUnavailable

UNREACHABLE = "postgresql://u:pw@127.0.0.1:1/db"  # refused at once: nothing listens on port 1
HEALTHY = SimpleNamespace(broken=False, closed=False)
BROKEN = SimpleNamespace(broken=True, closed=False)


def server_error(sqlstate: str) -> psycopg.Error:
    """The exception psycopg raises for a server error with this SQLSTATE."""
    return psycopg.errors.lookup(sqlstate)("from the server")


@pytest.mark.parametrize(
    ("error", "conn", "outage"),
    [
        (server_error("57P01"), HEALTHY, True),  # admin shutdown (pg_terminate_backend)
        (server_error("57P03"), None, True),  # cannot connect now (starting up)
        (server_error("08006"), None, True),  # connection failure
        (server_error("53300"), None, True),  # too many connections
        (server_error("53100"), None, True),  # disk full
        (server_error("25006"), None, True),  # read-only: a standby after a failover
        (psycopg.OperationalError("server closed the connection unexpectedly"), None, True),
        (DatabaseUnavailable("down"), None, True),
        (psycopg_pool.PoolTimeout("no connection"), None, True),
        # the statement's own fault: an OperationalError by class, not an outage
        (server_error("54000"), HEALTHY, False),  # index row too large
        (server_error("22008"), HEALTHY, False),  # timestamp out of range
        (server_error("42P01"), HEALTHY, False),  # undefined table
        (psycopg.DataError("NUL bytes"), HEALTHY, False),  # refused by psycopg itself
        (psycopg.errors.PipelineAborted("aborted"), HEALTHY, False),
        (UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates"), HEALTHY, False),
        (RuntimeError("bug"), None, False),
        # whatever the error, a connection that broke under it means the database failed
        (server_error("54000"), BROKEN, True),
        (psycopg.InterfaceError("the connection is closed"), BROKEN, True),
    ],
)
def test_is_connection_failure(error: BaseException, conn: Any, outage: bool) -> None:
    assert is_connection_failure(error, conn) is outage


class FakeConnector(Connector):
    """A Connector whose connection is a stand-in, to drive ``run`` without a server."""

    def __init__(self, conn: Any) -> None:
        super().__init__(UNREACHABLE, "test")
        self.conn = conn
        self.discarded = 0

    def get(self) -> Any:
        return self.conn

    def discard(self) -> None:
        self.discarded += 1


def test_run_returns_the_work_result_and_resets_the_backoff() -> None:
    connector = FakeConnector(HEALTHY)
    connector.backoff.failures = 3
    assert connector.run(lambda conn: 42) == 42
    assert connector.backoff.failures == 0
    assert connector.discarded == 0


def test_run_turns_an_outage_into_a_growing_pause(caplog: pytest.LogCaptureFixture) -> None:
    connector = FakeConnector(HEALTHY)

    def lost(conn: Any) -> None:
        raise server_error("57P01")

    with caplog.at_level(logging.WARNING, logger="pgbeat.db"):
        first = connector.run(lost)
        second = connector.run(lost)
    assert isinstance(first, Outage) and isinstance(second, Outage)
    assert 0 < first.pause < second.pause <= 10
    assert connector.discarded == 2
    assert len(caplog.records) == 1, "an outage is logged once, when it starts"
    assert "pw" not in caplog.text


def test_run_lets_the_statement_s_own_error_through_and_keeps_the_connection() -> None:
    connector = FakeConnector(HEALTHY)

    def too_large(conn: Any) -> None:
        raise server_error("54000")

    with pytest.raises(psycopg.errors.ProgramLimitExceeded):
        connector.run(too_large)
    assert connector.discarded == 0
    assert connector.backoff.failures == 0


def test_run_counts_a_failed_connect_as_an_outage() -> None:
    connector = Connector(UNREACHABLE, "test")
    result = connector.run(lambda conn: pytest.fail("no connection, no work"))
    assert isinstance(result, Outage)
    assert connector.backoff.failures == 1


def test_connectors_sharing_a_backoff_log_one_outage_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = Connector(UNREACHABLE, "a")
    second = Connector(UNREACHABLE, "b", backoff=first.backoff)
    with caplog.at_level(logging.WARNING):
        first.run(lambda conn: None)
        second.run(lambda conn: None)
    assert first.backoff.failures == 2
    assert len(caplog.records) == 1


@pytest.mark.parametrize(
    ("error", "refused_data"),
    [
        (server_error("54000"), True),  # index row too large
        (server_error("22008"), True),  # timestamp out of range
        (server_error("22P05"), True),  # \u0000 in jsonb
        (server_error("23514"), True),  # check constraint
        (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), True),
        (UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates"), True),
        (server_error("42P01"), False),  # undefined table: every row would fail
        (server_error("42501"), False),  # insufficient privilege
        (server_error("57P01"), False),
        (RuntimeError("bug"), False),
    ],
)
def test_is_data_error(error: BaseException, refused_data: bool) -> None:
    assert is_data_error(error) is refused_data
