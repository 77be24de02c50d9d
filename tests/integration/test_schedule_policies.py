"""This round's schedule rules, decided by the claim: start/end windows, queue and priority,
pause after failures, and the overlap policies buffer_one and cancel_other.

Ticks are driven by hand at chosen database times (``tick(conn, now)``); job outcomes are
written with SQL, as a worker would leave them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.errors import ScheduleError
from pgbeat.scheduling import state
from pgbeat.scheduling.scheduler import Scheduler
from tests.integration.test_schedule_state import SECOND, history, whole_second_after


def key(name: str, fire: datetime) -> str:
    return f"{name}@{fire:%Y-%m-%dT%H:%M:%SZ}"


def end_jobs(conn: psycopg.Connection[Any], name: str, status: str) -> None:
    """Every live job of ``name`` ends with ``status``, as a worker would leave it."""
    conn.execute(
        "UPDATE jobs SET status = %s, finished_at = now()"
        " WHERE split_part(unique_key, '@', 1) = %s AND status IN ('pending', 'running')",
        (status, name),
    )


def test_periods_outside_start_and_end_are_not_enqueued(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "probe", every="1s", catch_up="all", catch_up_window="1m")
    t0 = whole_second_after(conn)
    pgbeat.upsert_schedule(
        conn,
        "windowed",
        every="1s",
        catch_up="all",
        catch_up_window="1m",
        start_at=(t0 + 2 * SECOND).isoformat(),
        end_at=t0 + 4 * SECOND,
    )
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0 - SECOND)
    inserted: list[str] = []
    for n in range(8):
        inserted += scheduler.tick(conn, t0 + n * SECOND).inserted
    windowed = sorted(k for k in inserted if k.startswith("windowed@"))
    found = state.get_schedule(conn, "windowed")
    assert found is not None and found.schedule is not None and found.schedule.start_at
    start = found.schedule.start_at
    assert windowed == [key("windowed", start + n * SECOND) for n in range(3)]


def test_queue_and_priority_go_to_the_jobs_of_every_period(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "urgent", every="1s", queue="fast", priority=5)
    t0 = whole_second_after(conn)
    assert scheduler.tick(conn, t0).inserted == [key("urgent", t0)]
    job_id = state.run_schedule_now(conn, "urgent")
    rows = conn.execute("SELECT id, queue, priority FROM jobs ORDER BY id").fetchall()
    assert [(queue, priority) for _, queue, priority in rows] == [("fast", 5), ("fast", 5)]
    assert rows[-1][0] == job_id


def test_a_schedule_pauses_itself_after_consecutive_failed_periods(
    database_url: str, conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "flaky", every="1s", catch_up="none", pause_after_failures=2)
    t0 = whole_second_after(conn)
    other = Scheduler(database_url, None, heartbeat=False)  # a second replica
    scheduler.tick(conn, t0)
    end_jobs(conn, "flaky", "failed")
    scheduler.tick(conn, t0 + SECOND)
    end_jobs(conn, "flaky", "done")  # a success breaks the streak
    scheduler.tick(conn, t0 + 2 * SECOND)
    end_jobs(conn, "flaky", "failed")
    scheduler.tick(conn, t0 + 3 * SECOND)
    end_jobs(conn, "flaky", "failed")
    result = scheduler.tick(conn, t0 + 4 * SECOND)
    assert result.paused == ["flaky"] and result.skipped == [key("flaky", t0 + 4 * SECOND)]
    assert other.tick(conn, t0 + 4 * SECOND).paused == []  # decided once
    found = state.get_schedule(conn, "flaky")
    assert found is not None and found.paused
    assert found.paused_reason == "2 consecutive periods failed"
    assert history(conn, "flaky")[-1] == ("skipped", "failures", False)
    assert scheduler.tick(conn, t0 + 5 * SECOND).skipped == [key("flaky", t0 + 5 * SECOND)]
    assert state.resume_schedule(conn, "flaky") is True
    resumed = state.get_schedule(conn, "flaky")
    assert resumed is not None and not resumed.paused and resumed.paused_reason is None
    later = whole_second_after(conn) + 10 * SECOND  # the failures before the resume do not count
    assert key("flaky", later) in scheduler.tick(conn, later).inserted


def test_periods_still_retrying_are_passed_over_when_counting_failures(
    conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    """With retries that outlast the interval the newest periods are always unfinished: the
    count reads the periods that have ended, and a retry that then succeeds is no failure."""
    pgbeat.upsert_schedule(conn, "retrying", every="1s", catch_up="none", pause_after_failures=2)
    t0 = whole_second_after(conn)

    def retry_newest() -> None:  # the newest job failed an attempt and waits to run again
        conn.execute(
            "UPDATE jobs SET attempts = 1, run_at = now() + interval '1 hour'"
            " WHERE id = (SELECT max(id) FROM jobs)"
        )

    scheduler.tick(conn, t0)
    end_jobs(conn, "retrying", "failed")
    scheduler.tick(conn, t0 + SECOND)
    retry_newest()  # t0+1s: still retrying
    assert scheduler.tick(conn, t0 + 2 * SECOND).paused == []  # one ended period so far
    conn.execute(  # t0+2s ends failed; t0+1s keeps retrying
        "UPDATE jobs SET status = 'failed', finished_at = now()"
        " WHERE id = (SELECT max(id) FROM jobs)"
    )
    result = scheduler.tick(conn, t0 + 3 * SECOND)
    assert result.paused == ["retrying"], result
    assert result.skipped == [key("retrying", t0 + 3 * SECOND)]

    pgbeat.upsert_schedule(conn, "recovers", every="1s", catch_up="none", pause_after_failures=2)
    t1 = whole_second_after(conn)
    scheduler.tick(conn, t1)
    end_jobs(conn, "recovers", "failed")
    scheduler.tick(conn, t1 + SECOND)
    conn.execute(  # failed its first attempt, then succeeded
        "UPDATE jobs SET attempts = 2, status = 'done', finished_at = now()"
        " WHERE split_part(unique_key, '@', 1) = 'recovers' AND status = 'pending'"
    )
    assert scheduler.tick(conn, t1 + 2 * SECOND).paused == []
    end_jobs(conn, "recovers", "failed")
    assert scheduler.tick(conn, t1 + 3 * SECOND).paused == []  # failed, done, failed: no streak


def one_waiting(
    database_url: str, conn: psycopg.Connection[Any], name: str
) -> tuple[Scheduler, datetime]:
    """A buffer_one schedule ticked at t0 (its job running) and t0 + 1 s (that period waits)."""
    pgbeat.upsert_schedule(conn, name, every="1s", catch_up="none", overlap="buffer_one")
    t0 = whole_second_after(conn)
    scheduler = Scheduler(database_url, None, heartbeat=False)
    assert scheduler.tick(conn, t0).inserted == [key(name, t0)]
    conn.execute("UPDATE jobs SET status = 'running'")
    assert scheduler.tick(conn, t0 + SECOND).buffered == [key(name, t0 + SECOND)]
    return scheduler, t0


def test_buffer_one_keeps_one_period_waiting_until_the_live_job_ends(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    scheduler, t0 = one_waiting(database_url, conn, "slow")
    assert scheduler.tick(conn, t0 + 2 * SECOND).skipped == [key("slow", t0 + 2 * SECOND)]
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (1,)
    end_jobs(conn, "slow", "done")
    released = scheduler.tick(conn, t0 + 2 * SECOND + SECOND // 2)
    assert released.released == [key("slow", t0 + SECOND)]
    job = conn.execute("SELECT status, run_at FROM jobs WHERE id = (SELECT max(id) FROM jobs)")
    assert job.fetchone() == ("pending", t0 + SECOND)
    # the released job is live now: the next period waits behind it
    assert scheduler.tick(conn, t0 + 3 * SECOND).buffered == [key("slow", t0 + 3 * SECOND)]
    assert [outcome for outcome, _, _ in history(conn, "slow")] == [
        "enqueued",
        "enqueued",
        "skipped",
        "buffered",
    ]


def test_a_period_due_as_the_waiting_one_goes_waits_behind_it(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """The live job ends with a period waiting, and the next tick is a fire time: the
    waiting period is enqueued and the new one waits behind it (it was skipped)."""
    scheduler, t0 = one_waiting(database_url, conn, "steady")
    end_jobs(conn, "steady", "done")
    result = scheduler.tick(conn, t0 + 2 * SECOND)
    assert result.released == [key("steady", t0 + SECOND)], result
    assert result.buffered == [key("steady", t0 + 2 * SECOND)], result
    assert result.skipped == []
    assert [outcome for outcome, _, _ in history(conn, "steady")] == [
        "enqueued",
        "enqueued",
        "buffered",
    ]


def test_cancel_other_asks_the_running_job_to_stop_and_cancels_a_pending_one(
    database_url: str, conn: psycopg.Connection[Any], scheduler: Scheduler
) -> None:
    pgbeat.upsert_schedule(conn, "latest", every="1s", catch_up="none", overlap="cancel_other")
    t0 = whole_second_after(conn)
    scheduler.tick(conn, t0)
    conn.execute("UPDATE jobs SET status = 'running'")
    listener = psycopg.connect(database_url, autocommit=True)
    try:
        listener.execute("LISTEN pgbeat_cancel")
        listener.execute("LISTEN pgbeat_finished")
        scheduler.tick(conn, t0 + SECOND)  # the first job runs, the second is pending
        heard = [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=1)]
        scheduler.tick(conn, t0 + 2 * SECOND)  # the second is cancelled before it ran
        heard += [(n.channel, n.payload) for n in listener.notifies(timeout=5, stop_after=1)]
    finally:
        listener.close()
    rows = conn.execute(
        "SELECT id, status, cancel_requested_at IS NOT NULL, last_error FROM jobs ORDER BY id"
    ).fetchall()
    reason = "cancelled: a later period of its schedule replaced it (cancel_other)"
    assert [row[1:] for row in rows] == [
        ("running", True, reason),
        ("cancelled", False, reason),
        ("pending", False, None),
    ]
    assert heard == [("pgbeat_cancel", str(rows[0][0])), ("pgbeat_finished", str(rows[1][0]))]


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ({"start_at": "2026-02-01T00:00:00Z", "end_at": "2026-01-01T00:00:00Z"}, "end_at"),
        ({"pause_after_failures": 0}, "pause_after_failures"),
        ({"overlap": "queue"}, "overlap"),
        ({"start_at": "2026-01-01T00:00:00"}, "offset"),
        ({"queue": ""}, "queue"),
        ({"priority": 40_000}, "priority"),
    ],
)
def test_bad_values_are_refused_with_one_line_naming_the_schedule(
    conn: psycopg.Connection[Any], values: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ScheduleError) as error:
        pgbeat.upsert_schedule(conn, "bad", every="1m", **values)
    assert "'bad'" in str(error.value) and problem in str(error.value)
    assert "\n" not in str(error.value)


@pytest.mark.slow
def test_replicas_agree_on_buffer_one_and_pause_after_failures(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Any
) -> None:
    """Three scheduler processes race the same periods while this test plays the workers:
    at most one period of the buffer_one schedule ever waits, each waiting period gets its
    job once, and the failing schedule pauses itself once."""
    from tests.helpers import start_cli, wait_for
    from tests.integration.test_scheduler_processes import stop_all

    pgbeat.upsert_schedule(conn, "buf", every="1s", catch_up="none", overlap="buffer_one")
    pgbeat.upsert_schedule(conn, "flaky", every="1s", catch_up="none", pause_after_failures=3)
    replicas = [
        start_cli(["scheduler", "--log-level", "WARNING"], database_url, cwd=str(tmp_path))
        for _ in range(3)
    ]
    try:
        waiting: list[int] = []

        def played() -> bool:  # one round of the workers, then: has flaky paused?
            end_jobs(conn, "buf", "done")
            end_jobs(conn, "flaky", "failed")
            row = conn.execute(
                "SELECT count(*) FROM pgbeat_schedule_history"
                " WHERE schedule = 'buf' AND outcome = 'buffered'"
            ).fetchone()
            waiting.append(int(row[0]) if row else 0)
            found = state.get_schedule(conn, "flaky")
            released = conn.execute(
                "SELECT count(*) FROM pgbeat_schedule_history AS h JOIN jobs AS j"
                " ON j.id = h.job_id WHERE h.schedule = 'buf' AND h.outcome = 'enqueued'"
            ).fetchone()
            return bool(found and found.paused) and released is not None and released[0] >= 4

        wait_for(played, timeout=60, interval=0.3, message="flaky paused, buf enqueued")
    finally:
        outputs = stop_all(replicas, within=20)
    assert max(waiting) <= 1, waiting
    assert not any("Traceback" in out for out in outputs), outputs
    failures = conn.execute(
        "SELECT count(*) FROM pgbeat_schedule_history WHERE schedule = 'flaky'"
        " AND reason = 'failures'"
    ).fetchone()
    found = state.get_schedule(conn, "flaky")
    assert found is not None and found.paused_reason == "3 consecutive periods failed"
    assert failures is not None and failures[0] >= 1
    wrong = conn.execute(
        "SELECT h.fire_at FROM pgbeat_schedule_history AS h LEFT JOIN jobs AS j"
        " ON j.id = h.job_id WHERE h.schedule = 'buf' AND h.outcome = 'enqueued'"
        " AND (j.id IS NULL OR j.unique_key <> 'buf@' || to_char(h.fire_at AT TIME ZONE 'UTC',"
        ' \'YYYY-MM-DD"T"HH24:MI:SS"Z"\'))'
    ).fetchall()
    assert wrong == []
