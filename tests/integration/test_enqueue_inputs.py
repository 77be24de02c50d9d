"""Bad input to ``pgbeat.enqueue`` is refused before any SQL, naming the argument, and the
caller's transaction goes on as if nothing had been tried."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.testing import assert_enqueued, refute_enqueued


@pytest.mark.parametrize(
    ("arguments", "error", "names"),
    [
        ({"delay": 3600}, TypeError, "delay must be a timedelta"),
        ({"run_at": "2030-01-01T00:00:00Z"}, TypeError, "run_at must be an aware datetime"),
        ({"max_attempts": "3"}, TypeError, "max_attempts must be an int"),
        ({"max_attempts": True}, TypeError, "max_attempts must be an int"),
        ({"payload": {"ratio": math.nan}}, ValueError, "the payload has a value JSON cannot"),
        ({"payload": [math.inf]}, ValueError, "the payload has a value JSON cannot"),
        ({"payload": {"when": timedelta(1)}}, TypeError, "the payload must be JSON data"),
    ],
    ids=["int-delay", "str-run_at", "str-attempts", "bool-attempts", "nan", "inf", "object"],
)
def test_refused_before_any_sql_and_the_transaction_goes_on(
    database_url: str, arguments: dict[str, Any], error: type[Exception], names: str
) -> None:
    with psycopg.connect(database_url) as conn:
        pgbeat.enqueue(conn, "before", {})
        with pytest.raises(error, match=names):
            pgbeat.enqueue(conn, "bad", **arguments)
        with pytest.raises(error, match=names):
            pgbeat.enqueue_many(conn, [pgbeat.NewJob("bad", **arguments)])
        pgbeat.enqueue(conn, "after", {})  # the transaction is not aborted
        assert_enqueued(conn, "before")
        assert_enqueued(conn, "after")
        refute_enqueued(conn, "bad")
        conn.rollback()


def test_an_enqueue_before_migrate_says_so(empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url) as conn:
        with pytest.raises(pgbeat.NotMigrated, match="run `pgbeat migrate`"):
            pgbeat.enqueue(conn, "welcome_email", {})
        conn.rollback()
        with pytest.raises(pgbeat.NotMigrated, match="run `pgbeat migrate`"):
            pgbeat.enqueue_many(conn, [pgbeat.NewJob("welcome_email")])
        conn.rollback()
        with pytest.raises(pgbeat.NotMigrated, match="run `pgbeat migrate`"):
            pgbeat.enqueue(conn, "remind", {}, job_key="k")
