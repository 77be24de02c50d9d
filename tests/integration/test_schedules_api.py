"""Schedules created from code: upsert and delete in the caller's transaction, validated as
a schedules file is, never over a file's schedule, and seen by running replicas at once."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.errors import ConfigError
from pgbeat.scheduling.file import parse_schedules
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import in_thread, wait_for


def stored(conn: psycopg.Connection[Any], name: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT source, kind, cron, every, timezone, payload, max_attempts, catch_up,"
        " catch_up_window, overlap, jitter, paused, deleted_at IS NOT NULL"
        " FROM pgbeat_schedules WHERE name = %s",
        (name,),
    ).fetchone()
    if row is None:
        return None
    keys = "source kind cron every timezone payload max_attempts catch_up window overlap"
    return dict(zip([*keys.split(), "jitter", "paused", "deleted"], row, strict=True))


def test_upsert_creates_changes_and_leaves_alone(conn: psycopg.Connection[Any]) -> None:
    assert pgbeat.upsert_schedule(conn, "report", cron="0 2 * * *", timezone="Europe/Berlin")
    row = stored(conn, "report")
    assert row is not None
    assert (row["source"], row["kind"], row["cron"], row["timezone"]) == (
        "api", "report", "0 2 * * *", "Europe/Berlin",
    )  # fmt: skip
    assert (row["catch_up"], row["window"], row["overlap"], row["jitter"]) == (
        "latest", timedelta(hours=1), "allow", None,
    )  # fmt: skip
    same = pgbeat.upsert_schedule(conn, "report", cron="0 2 * * *", timezone="Europe/Berlin")
    assert same == "unchanged"
    changed = pgbeat.upsert_schedule(
        conn,
        "report",
        every="90m",
        kind="daily_report",
        payload={"format": "pdf"},
        max_attempts=3,
        catch_up="all",
        catch_up_window=timedelta(hours=2),
        overlap="skip",
        jitter="30s",
    )
    assert changed == "updated"
    row = stored(conn, "report")
    assert row is not None
    assert (row["cron"], row["every"], row["kind"], row["payload"], row["max_attempts"]) == (
        None, timedelta(minutes=90), "daily_report", {"format": "pdf"}, 3,
    )  # fmt: skip
    assert (row["catch_up"], row["window"], row["overlap"], row["jitter"]) == (
        "all", timedelta(hours=2), "skip", timedelta(seconds=30),
    )  # fmt: skip


def file_problem(key: str, toml_value: str) -> str:
    """What a schedules file says about ``key = toml_value`` in schedule 'bad'."""
    base = {"cron": '"* * * * *"'}
    if key in ("cron", "every"):
        base = {}
    text = "[schedules.bad]\n" + "".join(
        f"{k} = {v}\n" for k, v in {**base, key: toml_value}.items()
    )
    with pytest.raises(ConfigError) as caught:
        parse_schedules(text, source="f.toml")
    return caught.value.problems[0].removeprefix("f.toml: ")


@pytest.mark.parametrize(
    ("key", "value", "toml_value"),
    [
        ("cron", "61 * * * *", '"61 * * * *"'),
        ("every", "soon", '"soon"'),
        ("timezone", "Mars/Olympus", '"Mars/Olympus"'),
        ("catch_up", "maybe", '"maybe"'),
        ("catch_up_window", "0s", '"0s"'),
        ("overlap", "sometimes", '"sometimes"'),
        ("jitter", "-1s", '"-1s"'),
        ("max_attempts", 0, "0"),
    ],
)
def test_upsert_rejects_what_a_file_rejects_with_the_same_words(
    conn: psycopg.Connection[Any], key: str, value: Any, toml_value: str
) -> None:
    values = {"cron": "* * * * *", key: value} if key not in ("cron", "every") else {key: value}
    with pytest.raises(pgbeat.ScheduleError) as caught:
        pgbeat.upsert_schedule(conn, "bad", **values)
    message = str(caught.value)
    assert "\n" not in message
    assert message == file_problem(key, toml_value)
    assert stored(conn, "bad") is None


def test_upsert_needs_exactly_one_of_cron_and_every(conn: psycopg.Connection[Any]) -> None:
    cases: tuple[dict[str, Any], ...] = ({}, {"cron": "* * * * *", "every": "1m"})
    for values in cases:
        with pytest.raises(ValueError, match="'cron' or 'every'"):
            pgbeat.upsert_schedule(conn, "x", **values)
    with pytest.raises(pgbeat.ScheduleError, match="characters other than"):
        pgbeat.upsert_schedule(conn, "no spaces", every="1m")


def test_upsert_and_delete_are_in_the_callers_transaction(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        pgbeat.upsert_schedule(conn, "per_customer_42", every="1h", payload={"customer": 42})
        conn.rollback()
        assert stored(conn, "per_customer_42") is None
        pgbeat.upsert_schedule(conn, "per_customer_42", every="1h", payload={"customer": 42})
        conn.commit()
        assert pgbeat.delete_schedule(conn, "per_customer_42") is True
        conn.rollback()
        row = stored(conn, "per_customer_42")
        assert row is not None and not row["deleted"]
        assert pgbeat.delete_schedule(conn, "per_customer_42") is True
        conn.commit()
        row = stored(conn, "per_customer_42")
        assert row is not None and row["deleted"]  # a tombstone, for polling replicas
        assert pgbeat.delete_schedule(conn, "per_customer_42") is False
        assert pgbeat.delete_schedule(conn, "never_was") is False


def test_async_connections(database_url: str) -> None:
    async def main() -> tuple[Any, ...]:
        async with await psycopg.AsyncConnection.connect(database_url) as aconn:
            first = await pgbeat.upsert_schedule(aconn, "a", every="1m")
            second = await pgbeat.upsert_schedule_async(aconn, "a", every="2m")
            gone = await pgbeat.delete_schedule(aconn, "a")
            await aconn.commit()
            return first, second, gone

    assert asyncio.run(main()) == ("created", "updated", True)


def test_code_never_takes_over_a_file_schedule(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    from_file = parse_schedules('[schedules.nightly]\ncron = "0 3 * * *"\n')
    Scheduler(database_url, from_file, heartbeat=False).tick(conn, pgbeat_now(conn))
    with pytest.raises(pgbeat.ScheduleConflict, match="declared in a schedules file"):
        pgbeat.upsert_schedule(conn, "nightly", cron="0 4 * * *")
    with pytest.raises(pgbeat.ScheduleConflict, match="remove it from the file"):
        pgbeat.delete_schedule(conn, "nightly")
    row = stored(conn, "nightly")
    assert row is not None and row["cron"] == "0 3 * * *"


def test_a_file_sync_leaves_code_schedules_alone(
    database_url: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    pgbeat.upsert_schedule(conn, "mine", every="1h")
    pgbeat.upsert_schedule(conn, "clash", every="1h")
    text = '[schedules.clash]\nevery = "1m"\n[schedules.filed]\nevery = "1m"\n'
    Scheduler(database_url, parse_schedules(text), heartbeat=False).tick(conn, pgbeat_now(conn))
    names = [r[0] for r in conn.execute("SELECT name FROM pgbeat_schedules ORDER BY name")]
    assert names == ["clash", "filed", "mine"]
    assert stored(conn, "clash") == {**(stored(conn, "clash") or {}), "every": timedelta(hours=1)}
    assert "'clash' is a schedule created from code" in caplog.text
    # a file without them deletes its own schedules only
    Scheduler(database_url, [], heartbeat=False).tick(conn, pgbeat_now(conn))
    live = conn.execute("SELECT name FROM pgbeat_schedules WHERE deleted_at IS NULL ORDER BY 1")
    assert [r[0] for r in live] == ["clash", "mine"]


def pgbeat_now(conn: psycopg.Connection[Any]) -> Any:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize("pooler", ["none", "transaction"])
@pytest.mark.slow
def test_a_running_scheduler_picks_up_changes_without_a_restart(
    database_url: str,
    conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
    pooler: str,
) -> None:
    """With NOTIFY at once; behind a transaction pooler (no LISTEN) at the next tick."""
    monkeypatch.setenv("PGBEAT_POOLER", pooler)
    pgbeat.upsert_schedule(conn, "pace", every="1s", catch_up="none")  # ticks every second
    scheduler = Scheduler(database_url, None, heartbeat=False)
    with in_thread(scheduler, join=10):
        wait_for(lambda: "pace" in scheduler.catalog, message="the first load")
        committed = time.monotonic()
        pgbeat.upsert_schedule(conn, "added", every="1s", catch_up="none")
        wait_for(lambda: "added" in scheduler.catalog, timeout=3, message="the new schedule")
        seen_after = time.monotonic() - committed
        wait_for(
            lambda: (
                conn.execute("SELECT count(*) FROM jobs WHERE kind = 'added'").fetchone() != (0,)
            ),
            timeout=5,
            message="a job of the new schedule",
        )
        pgbeat.delete_schedule(conn, "added")
        wait_for(lambda: "added" not in scheduler.catalog, timeout=3, message="the deletion")
    assert seen_after < (0.5 if pooler == "none" else 1.5)


def test_a_sqlalchemy_session_holds_the_schedule_in_its_transaction(database_url: str) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.orm import Session

    engine = sqlalchemy.create_engine(
        database_url.replace("postgresql://", "postgresql+psycopg://")
    )
    try:
        with Session(engine) as session:
            assert pgbeat.upsert_schedule(session, "from_orm", every="1h") == "created"
            session.rollback()
            assert pgbeat.upsert_schedule(session, "from_orm", every="1h") == "created"
            session.commit()
    finally:
        engine.dispose()
    with psycopg.connect(database_url) as conn:
        row = stored(conn, "from_orm")
    assert row is not None and row["source"] == "api"
