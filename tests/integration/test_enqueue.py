"""Enqueueing: in the caller's transaction, unique keys, delays by the database clock, bulk, CLI."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pydantic
import pytest

import pgbeat
from tests.helpers import run_cli


def count_jobs(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_rollback_leaves_no_job_and_commit_leaves_both(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as setup:
        setup.execute("CREATE TABLE users (id bigint GENERATED ALWAYS AS IDENTITY, email text)")

    with psycopg.connect(database_url) as conn:
        with pytest.raises(RuntimeError), conn.transaction():
            user_id = conn.execute(
                "INSERT INTO users (email) VALUES ('a@x') RETURNING id"
            ).fetchone()
            pgbeat.enqueue(conn, "welcome_email", {"user_id": user_id})
            raise RuntimeError("the request failed after the writes")
        with conn.transaction():
            row = conn.execute("INSERT INTO users (email) VALUES ('b@x') RETURNING id").fetchone()
            assert row is not None
            job_id = pgbeat.enqueue(conn, "welcome_email", {"user_id": row[0]})
        conn.commit()

    with psycopg.connect(database_url) as check:
        assert check.execute("SELECT email FROM users").fetchall() == [("b@x",)]
        jobs = check.execute("SELECT id, kind, payload, status FROM jobs").fetchall()
        assert jobs == [(job_id, "welcome_email", {"user_id": row[0]}, "pending")]


def test_unique_key_enqueues_once_per_kind(conn: psycopg.Connection[Any]) -> None:
    first = pgbeat.enqueue(conn, "report", {}, unique_key="2026-11-30")
    again = pgbeat.enqueue(conn, "report", {"other": True}, unique_key="2026-11-30")
    other_kind = pgbeat.enqueue(conn, "export", {}, unique_key="2026-11-30")
    assert isinstance(first, int)
    assert again is None
    assert isinstance(other_kind, int)
    assert count_jobs(conn) == 2


def test_delay_counts_from_the_database_clock(database_url: str) -> None:
    with psycopg.connect(database_url) as conn, conn.transaction():
        job_id = pgbeat.enqueue(conn, "reminder", {"user_id": 1}, delay=timedelta(hours=24))
        row = conn.execute("SELECT run_at - now() FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == (timedelta(hours=24),)


def test_run_at_and_defaults(conn: psycopg.Connection[Any]) -> None:
    at = datetime(2030, 1, 1, 9, tzinfo=UTC)
    job_id = pgbeat.enqueue(conn, "later", None, run_at=at, max_attempts=3)
    row = conn.execute(
        "SELECT payload, run_at, max_attempts, attempts, status FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row == ({}, at, 3, 0, "pending")
    default_id = pgbeat.enqueue(conn, "now", {"a": 1})
    assert conn.execute(
        "SELECT max_attempts, run_at <= now() FROM jobs WHERE id = %s", (default_id,)
    ).fetchone() == (8, True)


def test_pydantic_payloads_are_dumped(conn: psycopg.Connection[Any]) -> None:
    class Welcome(pydantic.BaseModel):
        user_id: int
        sent: datetime

    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    job_id = pgbeat.enqueue(conn, "welcome", Welcome(user_id=7, sent=when))
    row = conn.execute("SELECT payload FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == ({"user_id": 7, "sent": "2026-01-02T03:04:05Z"},)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"run_at": datetime(2030, 1, 1), "kind": "k"}, "timezone-aware"),  # noqa: DTZ001
        (
            {"run_at": datetime(2030, 1, 1, tzinfo=UTC), "delay": timedelta(1), "kind": "k"},
            "not both",
        ),
        ({"max_attempts": 0, "kind": "k"}, "at least 1"),
        ({"kind": ""}, "non-empty"),
    ],
)
def test_bad_arguments_insert_nothing(
    conn: psycopg.Connection[Any], kwargs: dict[str, Any], message: str
) -> None:
    kind = kwargs.pop("kind")
    with pytest.raises(ValueError, match=message):
        pgbeat.enqueue(conn, kind, {}, **kwargs)
    assert count_jobs(conn) == 0


def test_enqueue_many_inserts_thousands_in_one_statement(conn: psycopg.Connection[Any]) -> None:
    jobs = [pgbeat.NewJob("bulk", {"i": i}, unique_key=f"k{i % 4000}") for i in range(5000)]
    ids = pgbeat.enqueue_many(conn, jobs)
    assert len(ids) == 4000  # the last 1000 repeat keys of the first 1000
    assert len(set(ids)) == 4000
    assert count_jobs(conn) == 4000
    assert pgbeat.enqueue_many(conn, []) == []
    delayed = pgbeat.enqueue_many(conn, [pgbeat.NewJob("bulk", delay=timedelta(hours=1))])
    row = conn.execute(
        "SELECT run_at > now() + interval '59 minutes' FROM jobs WHERE id = %s", (delayed[0],)
    ).fetchone()
    assert row == (True,)


AWKWARD_TEXT = ['say "hi"', "back\\slash", "{braces},commas", "NULL", "", "日本語 ✓", "a'b"]


def test_enqueue_many_keeps_every_column_exactly(conn: psycopg.Connection[Any]) -> None:
    """Columns travel as array literals: quotes, backslashes, NULLs and times must survive."""
    at = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    jobs = [
        pgbeat.NewJob(
            f"kind {text}",
            {"text": text, "list": [1, None, 2.5], "nested": {"q": text}},
            unique_key=text or None,
            max_attempts=i + 1,
            run_at=at + timedelta(days=i) if i % 2 else None,
            delay=timedelta(seconds=1.5, microseconds=7) if i % 2 == 0 else None,
        )
        for i, text in enumerate(AWKWARD_TEXT)
    ]
    jobs.append(pgbeat.NewJob("plain"))  # payload None -> {}
    ids = pgbeat.enqueue_many(conn, jobs)
    assert len(ids) == len(jobs)
    rows = conn.execute(
        "SELECT kind, payload, unique_key, max_attempts, run_at,"
        " run_at - created_at FROM jobs ORDER BY id"
    ).fetchall()
    for i, text in enumerate(AWKWARD_TEXT):
        kind, payload, key, attempts, run_at, after = rows[i]
        assert kind == f"kind {text}"
        assert payload == {"text": text, "list": [1, None, 2.5], "nested": {"q": text}}
        assert key == (text or None)
        assert attempts == i + 1
        if i % 2:
            assert run_at == at + timedelta(days=i)
        else:  # created_at and now() are the same transaction's clock
            assert after == timedelta(seconds=1.5, microseconds=7)
    assert rows[-1][:4] == ("plain", {}, None, 8)


def test_async_enqueue_shares_the_statement(database_url: str) -> None:
    async def scenario() -> tuple[int | None, int | None, list[int]]:
        async with await psycopg.AsyncConnection.connect(database_url) as aconn:
            async with aconn.transaction():
                first = await pgbeat.enqueue(aconn, "async_kind", {"n": 1}, unique_key="u")
                again = await pgbeat.enqueue_async(aconn, "async_kind", {"n": 2}, unique_key="u")
                many = await pgbeat.enqueue_many_async(
                    aconn, [pgbeat.NewJob("async_kind", {"n": i}) for i in range(3)]
                )
            return first, again, many

    first, again, many = asyncio.run(scenario())
    assert isinstance(first, int) and again is None and len(many) == 3
    with psycopg.connect(database_url) as conn:
        assert count_jobs(conn) == 4


# -- the CLI --------------------------------------------------------------------------------


def test_cli_enqueue_prints_the_id(database_url: str, conn: psycopg.Connection[Any]) -> None:
    result = run_cli(
        [
            "enqueue",
            "reminder",
            "--payload",
            '{"user_id": 42}',
            "--in",
            "24h",
            "--max-attempts",
            "3",
            "--unique-key",
            "r-42",
        ],
        database_url,
    )
    assert result.returncode == 0, result.stderr
    job_id = int(result.stdout.strip())
    row = conn.execute(
        "SELECT kind, payload, max_attempts, unique_key, "
        "run_at - created_at BETWEEN interval '23h 59m' AND interval '24h 1m' "
        "FROM jobs WHERE id = %s",
        (job_id,),
    ).fetchone()
    assert row == ("reminder", {"user_id": 42}, 3, "r-42", True)

    duplicate = run_cli(["enqueue", "reminder", "--unique-key", "r-42"], database_url)
    assert duplicate.returncode == 0
    assert duplicate.stdout == ""
    assert "already exists" in duplicate.stderr


@pytest.mark.slow
def test_cli_enqueue_at(database_url: str, conn: psycopg.Connection[Any]) -> None:
    result = run_cli(["enqueue", "k", "--at", "2030-06-01T09:00:00+02:00"], database_url)
    assert result.returncode == 0, result.stderr
    row = conn.execute("SELECT run_at FROM jobs WHERE id = %s", (int(result.stdout),)).fetchone()
    assert row == (datetime(2030, 6, 1, 7, tzinfo=UTC),)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["enqueue", "k", "--payload", "{not json"], "bad JSON payload"),
        (["enqueue", "k", "--in", "soon"], "bad duration"),
        (["enqueue", "k", "--at", "tomorrow"], "bad ISO-8601"),
        (["enqueue", "k", "--at", "2030-01-01T00:00:00"], "no UTC offset"),
        (["enqueue", "k", "--bogus"], "unrecognized arguments"),
        (["enqueue", "k", "--max-attempts", "0"], "at least 1"),
        (["enqueue", "k", "--in", "1h", "--at", "2030-01-01T00:00:00Z"], "not allowed with"),
    ],
)
@pytest.mark.slow
def test_cli_enqueue_bad_input_is_one_line_and_inserts_nothing(
    database_url: str, conn: psycopg.Connection[Any], args: list[str], fragment: str
) -> None:
    result = run_cli(args, database_url)
    assert result.returncode == 1
    assert fragment in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert count_jobs(conn) == 0


@pytest.mark.slow
def test_cli_enqueue_into_an_unmigrated_database(empty_database_url: str) -> None:
    result = run_cli(["enqueue", "k"], empty_database_url)
    assert result.returncode == 1
    assert "pgbeat migrate" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.slow
def test_cli_payload_round_trips_unicode(database_url: str, conn: psycopg.Connection[Any]) -> None:
    payload = {"name": 'Zoë "quoted" 東京', "nested": [1, {"x": None}]}
    result = run_cli(
        ["enqueue", "kind with 'quotes' ✓", "--payload", json.dumps(payload)], database_url
    )
    assert result.returncode == 0, result.stderr
    row = conn.execute("SELECT kind, payload FROM jobs").fetchone()
    assert row == ("kind with 'quotes' ✓", payload)
