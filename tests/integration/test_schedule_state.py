"""Pause, resume, run now, overlap, jitter, missed periods and the history's retention.

Ticks are driven by hand at chosen database times (``tick(conn, now)``), after the
schedules were created at the database's real time: every outcome lands in the history.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.scheduling import state
from pgbeat.scheduling.jitter import jitter_offset
from pgbeat.scheduling.scheduler import Scheduler

SECOND = timedelta(seconds=1)


def database_now(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def whole_second_after(conn: psycopg.Connection[Any]) -> datetime:
    """The first whole second after the newest schedule's creation, pause or resume (or the
    database's now): every 1s period from it on belongs to every schedule, none before it
    does, and none falls in an earlier pause. (Counting from now() instead failed when a
    second began between the creation and this call; counting from the creation alone
    failed on a loaded machine when the resume came more than a second after it: that
    period was paused; and when the pause came more than a second after it (CI run 5 of
    2026-12-07): that period was before the pause.)"""
    row = conn.execute(
        "SELECT max(greatest(created_at, paused_at, resumed_at)) FROM pgbeat_schedules"
    ).fetchone()
    start = row[0] if row is not None and row[0] is not None else database_now(conn)
    start_: datetime = start
    return start_.replace(microsecond=0) + SECOND


def history(conn: psycopg.Connection[Any], name: str) -> list[tuple[Any, ...]]:
    """(seconds after t0 or None for manual, outcome, reason, has a job) per history row."""
    return [
        (row.outcome, row.reason, row.job_id is not None)
        for row in reversed(state.schedule_history(conn, name, limit=1000))
    ]


def test_paused_periods_are_skipped_and_not_caught_up(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "beat", every="1s", catch_up="all", catch_up_window="1m")
    t0 = whole_second_after(conn)
    assert scheduler.tick(conn, t0).inserted == [f"beat@{t0:%Y-%m-%dT%H:%M:%SZ}"]
    assert state.pause_schedule(conn, "beat", by="test") is True
    assert state.pause_schedule(conn, "beat") is False  # already paused
    paused = scheduler.tick(conn, t0 + 3 * SECOND)
    assert paused.inserted == [] and len(paused.skipped) == 3
    assert state.resume_schedule(conn, "beat") is True
    # the database's clock has not reached t0 + 3 s yet: the resume is before these periods
    later = max(database_now(conn), t0 + 3 * SECOND).replace(microsecond=0) + 2 * SECOND
    resumed = scheduler.tick(conn, later)
    assert resumed.skipped == [] and resumed.inserted
    rows = history(conn, "beat")
    assert rows[:4] == [("enqueued", None, True)] + [("skipped", "paused", False)] * 3
    assert all(row == ("enqueued", None, True) for row in rows[4:])
    jobs = conn.execute("SELECT count(*) FROM jobs WHERE kind = 'beat'").fetchone()
    assert jobs == (len(rows) - 3,)


@pytest.mark.slow
def test_a_resume_does_not_catch_up_when_no_replica_ran_during_the_pause(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "beat", every="1s", catch_up="all", catch_up_window="1h")
    state.pause_schedule(conn, "beat")
    t0 = whole_second_after(conn)
    conn.execute("SELECT pg_sleep(1.1)")  # the pause lasts past t0
    state.resume_schedule(conn, "beat")
    found = state.get_schedule(conn, "beat")
    assert found is not None and found.resumed_at is not None and found.paused_at is not None
    paused_at, resumed_at = found.paused_at, found.resumed_at
    scheduler = Scheduler(database_url, None, heartbeat=False)  # starts after the resume
    result = scheduler.tick(conn, resumed_at + 2 * SECOND)
    fires = [datetime.fromisoformat(k.partition("@")[2]) for k in result.inserted]
    # A period due between the schedule's creation and its pause (a second boundary
    # crossed there, on a loaded machine: CI run 65) is caught up, as catch_up = "all"
    # says; none of the pause's is.
    assert fires and max(fires) > resumed_at and t0 <= resumed_at
    assert not [fire for fire in fires if paused_at <= fire <= resumed_at]
    # the resume recorded the pause's periods itself: no replica can catch them up later
    skipped = [r for r in state.schedule_history(conn, "beat") if r.outcome == "skipped"]
    assert skipped and all(r.reason == "paused" and r.fire_at <= resumed_at for r in skipped)
    assert t0 in {r.fire_at for r in skipped}


def test_run_now_enqueues_one_job_with_a_key_of_its_own(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "report", every="1s", payload={"n": 1}, max_attempts=2)
    state.pause_schedule(conn, "report")  # run now works while paused
    first = state.run_schedule_now(conn, "report", by="ui:alice")
    second = state.run_schedule_now(conn, "report")
    assert second != first
    rows = conn.execute(
        "SELECT id, kind, payload, max_attempts, unique_key, status, run_at <= now()"
        " FROM jobs ORDER BY id"
    ).fetchall()
    assert rows == [
        (first, "report", {"n": 1}, 2, f"report@manual:{first}", "pending", True),
        (second, "report", {"n": 1}, 2, f"report@manual:{second}", "pending", True),
    ]
    state.resume_schedule(conn, "report")
    t0 = whole_second_after(conn)
    period = Scheduler(database_url, None, heartbeat=False).tick(conn, t0)
    # periods go on as usual (one just before the pause may be caught up beside it)
    assert period.inserted[-1:] == [f"report@{t0:%Y-%m-%dT%H:%M:%SZ}"], period.inserted
    manual = [r for r in state.schedule_history(conn, "report") if r.outcome == "manual"]
    assert sorted((r.job_id, r.inserted_by) for r in manual) == [
        (first, "ui:alice"),
        (second, None),
    ]
    with pytest.raises(pgbeat.ScheduleNotFound):
        state.run_schedule_now(conn, "nope")
    with pytest.raises(pgbeat.ScheduleNotFound):
        state.pause_schedule(conn, "nope")


def test_overlap_skip_waits_for_the_previous_job(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    with conn.transaction():  # one transaction: one created_at for both
        pgbeat.upsert_schedule(conn, "slow", every="1s", overlap="skip", catch_up="all")
        pgbeat.upsert_schedule(conn, "fast", every="1s", catch_up="all")  # overlap = "allow"
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    second = scheduler.tick(conn, t0 + SECOND)
    assert second.skipped == [f"slow@{t0 + SECOND:%Y-%m-%dT%H:%M:%SZ}"]
    assert second.inserted == [f"fast@{t0 + SECOND:%Y-%m-%dT%H:%M:%SZ}"]
    conn.execute("UPDATE jobs SET status = 'done', attempts = 1, finished_at = now()")
    # two periods in one tick: the first is enqueued, the second waits for it
    third = scheduler.tick(conn, t0 + 3 * SECOND)
    assert third.inserted == [
        f"fast@{t0 + 2 * SECOND:%Y-%m-%dT%H:%M:%SZ}",
        f"fast@{t0 + 3 * SECOND:%Y-%m-%dT%H:%M:%SZ}",
        f"slow@{t0 + 2 * SECOND:%Y-%m-%dT%H:%M:%SZ}",
    ]
    assert third.skipped == [f"slow@{t0 + 3 * SECOND:%Y-%m-%dT%H:%M:%SZ}"]
    assert [(o, r) for o, r, _ in history(conn, "slow")] == [
        ("enqueued", None), ("skipped", "overlap"), ("enqueued", None), ("skipped", "overlap"),
    ]  # fmt: skip


def test_jitter_delays_run_at_by_the_periods_own_offset(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "herd", every="1s", jitter="45s", catch_up="all")
    t0 = whole_second_after(conn)
    Scheduler(database_url, None, heartbeat=False).tick(conn, t0 + 4 * SECOND)
    rows = conn.execute("SELECT unique_key, run_at, keep_until - run_at FROM jobs").fetchall()
    assert len(rows) == 5
    offsets = set()
    for key, run_at, keep in rows:
        fire = datetime.fromisoformat(key.partition("@")[2])
        assert run_at == fire + jitter_offset("herd", fire, timedelta(seconds=45))
        assert timedelta(0) <= run_at - fire < timedelta(seconds=45)
        assert keep > timedelta(hours=1)  # kept as long as the catch-up window needs
        offsets.add(run_at - fire)
    assert len(offsets) == 5  # each period its own offset


def test_periods_dropped_by_catch_up_are_recorded_as_missed(
    database_url: str, conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    with conn.transaction():  # one transaction: one created_at for both
        pgbeat.upsert_schedule(conn, "none", every="1s", catch_up="none")
        pgbeat.upsert_schedule(conn, "latest", every="1s", catch_up="latest")
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    # every replica was down for 10 s: 1..5 s are 5 s late or more, 6..10 s on time
    result = scheduler.tick(conn, t0 + 10 * SECOND)
    assert len(result.missed) == 10 and len(result.inserted) == 10
    outcomes = [o for o, _, _ in history(conn, "none")]
    assert outcomes == ["enqueued"] + ["missed"] * 5 + ["enqueued"] * 5
    reasons = {r for _, r, _ in history(conn, "latest") if r}
    assert reasons == {"catch_up=latest"}
    # a replica that finds a period on time after another reported it missed enqueues it
    conn.execute("DELETE FROM jobs")
    conn.execute("UPDATE pgbeat_schedule_history SET outcome = 'missed', job_id = NULL")
    late = Scheduler(database_url, None, heartbeat=False).tick(conn, t0 + 10 * SECOND)
    assert len(late.inserted) == 2 * 5  # the on-time ones, each once


def test_history_retention_deletes_only_old_rows(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pgbeat.upsert_schedule(conn, "old", every="1m")
    conn.execute(
        "INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, inserted_at)"
        " SELECT 'old', now() - n * interval '1 day', 'missed', now() - n * interval '1 day'"
        " FROM generate_series(1, 40) AS n"
    )
    pgbeat.delete_schedule(conn, "old")
    conn.execute("UPDATE pgbeat_schedules SET deleted_at = now() - interval '2 days'")
    scheduler = Scheduler(database_url, None, heartbeat=False, history_retention=timedelta(days=7))
    assert scheduler.purge_history(conn) == 34
    remaining = conn.execute("SELECT count(*) FROM pgbeat_schedule_history").fetchone()
    assert remaining == (6,)
    assert conn.execute("SELECT count(*) FROM pgbeat_schedules").fetchone() == (0,)


@pytest.mark.slow
def test_a_replica_that_missed_a_deletion_enqueues_nothing_from_before_the_re_creation(
    database_url: str, conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    # The storm's race, made deterministic: a replica ticks api_tick, the schedule is
    # deleted and created again (same definition, same hash) before that replica looks at
    # the table again. Its next tick must not catch up the deleted span: the claim
    # statement itself refuses periods at or before the re-creation.
    pgbeat.upsert_schedule(conn, "beat", every="1s", catch_up="all", catch_up_window="1m")
    t0 = whole_second_after(conn)
    before = scheduler.tick(conn, t0).inserted  # t0, and t0 - 1 s if created just before
    assert before and before[-1] == f"beat@{t0:%Y-%m-%dT%H:%M:%SZ}"
    assert pgbeat.delete_schedule(conn, "beat") is True
    conn.execute("SELECT pg_sleep(2.2)")  # periods fire while it is deleted
    pgbeat.upsert_schedule(conn, "beat", every="1s", catch_up="all", catch_up_window="1m")
    found = state.get_schedule(conn, "beat")
    assert found is not None
    created = found.created_at
    assert created is not None
    later = created.replace(microsecond=0) + 3 * SECOND
    stale = scheduler.tick(conn, later, refresh=False)  # its copy still has the old schedule
    fires = [datetime.fromisoformat(key.partition("@")[2]) for key in stale.inserted]
    assert fires and min(fires) > created, (created, fires)
    keys = [row[0] for row in conn.execute("SELECT unique_key FROM jobs ORDER BY 1")]
    assert [datetime.fromisoformat(k.partition("@")[2]) for k in keys[len(before) :]] == fires
    # the next replica to look at the table agrees
    assert Scheduler(database_url, None, heartbeat=False).tick(conn, later).inserted == []
