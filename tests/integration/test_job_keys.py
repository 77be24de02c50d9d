"""Jobs by key, one caller at a time: each on_conflict mode against an absent, pending and
running live job; cancel, reschedule, find; the end of a superseded run; retry and purge
with keys; the async forms and the command line. The races are in test_job_key_races.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.job import Job
from pgbeat.jobs import actions, reads
from pgbeat.worker import operations
from tests.helpers import run_cli, running_worker, wait_for

LEASE = timedelta(minutes=5)
HOUR = timedelta(hours=1)
MODES = ("ignore", "replace", "keep_earliest", "keep_latest")


def row(conn: psycopg.Connection[Any], job_id: int | None) -> dict[str, Any]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        found = cursor.execute(
            "SELECT id, status, payload, run_at, attempts, max_attempts, job_key, superseded_at, "
            "last_error, created_at, run_at - created_at AS wait FROM jobs WHERE id = %s",
            (job_id,),
        ).fetchone()
    assert found is not None, f"no job {job_id}"
    return found


def live_rows(conn: psycopg.Connection[Any], key: str = "u1") -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT id, status FROM jobs WHERE job_key = %s AND superseded_at IS NULL "
        "AND status IN ('pending', 'running')",
        (key,),
    ).fetchall()


def claim_one(conn: psycopg.Connection[Any], lease: timedelta = LEASE) -> Job:
    (job,) = operations.claim_jobs(conn, 1, lease, None)
    return job


@pytest.fixture
def tx(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose statements share one transaction, so they share one now()."""
    with psycopg.connect(database_url) as connection:
        yield connection


def remind(conn: Any, payload: Any, **options: Any) -> Any:
    return pgbeat.enqueue(conn, "remind", payload, job_key="u1", **options)


# -- the semantics table: live job absent / pending / running x mode ----------------------


@pytest.mark.parametrize("mode", MODES)
def test_no_live_job_inserts(tx: psycopg.Connection[Any], mode: str) -> None:
    job_id = remind(tx, {"v": 1}, delay=HOUR, on_conflict=mode)
    assert isinstance(job_id, int)
    found = row(tx, job_id)
    assert (found["status"], found["payload"], found["job_key"]) == ("pending", {"v": 1}, "u1")
    assert found["wait"] == HOUR


@pytest.mark.parametrize(
    ("mode", "expected_payload", "expected_wait"),
    [
        ("ignore", {"v": 1}, 2 * HOUR),
        ("replace", {"v": 2}, 3 * HOUR),
        ("keep_earliest", {"v": 2}, 2 * HOUR),
        ("keep_latest", {"v": 2}, 3 * HOUR),
    ],
)
def test_pending_live_job(
    tx: psycopg.Connection[Any], mode: str, expected_payload: Any, expected_wait: timedelta
) -> None:
    conn = tx
    first = remind(conn, {"v": 1}, delay=2 * HOUR)
    again = remind(conn, {"v": 2}, delay=3 * HOUR, on_conflict=mode)
    assert again == (None if mode == "ignore" else first)
    found = row(conn, first)
    assert (found["payload"], found["wait"]) == (expected_payload, expected_wait)
    assert live_rows(conn) == [(first, "pending")]
    # and earlier than the live one: keep_latest keeps it, the others take it or ignore it
    remind(conn, {"v": 3}, delay=HOUR, on_conflict=mode)
    earlier = {"ignore": 2 * HOUR, "replace": HOUR, "keep_earliest": HOUR, "keep_latest": 3 * HOUR}
    assert row(conn, first)["wait"] == earlier[mode]


@pytest.mark.parametrize("mode", MODES)
def test_running_live_job(conn: psycopg.Connection[Any], mode: str) -> None:
    first = remind(conn, {"v": 1})
    run = claim_one(conn)
    again = remind(conn, {"v": 2}, delay=HOUR, on_conflict=mode)
    old = row(conn, first)
    if mode == "ignore":
        assert again is None
        assert old["superseded_at"] is None
        assert live_rows(conn) == [(first, "running")]
        return
    # the run goes on with what it started with; the new values are a new pending job
    assert isinstance(again, int) and again != first
    assert (old["status"], old["payload"]) == ("running", {"v": 1})
    assert old["superseded_at"] is not None and "superseded" in old["last_error"]
    new = row(conn, again)
    assert (new["status"], new["payload"], new["wait"]) == ("pending", {"v": 2}, HOUR)
    assert live_rows(conn) == [(again, "pending")]
    # on an autocommit connection too, the supersede and the insert commit as one
    xmins = conn.execute(
        "SELECT DISTINCT xmin::text FROM jobs WHERE id IN (%s, %s)", (first, again)
    )
    assert len(xmins.fetchall()) == 1
    operations.complete_jobs(conn, [run])  # the old run still records its outcome
    assert row(conn, first)["status"] == "done"


def test_the_key_is_free_once_its_job_ended(conn: psycopg.Connection[Any]) -> None:
    ended = []
    for end in ("done", "failed", "cancelled"):
        job_id = remind(conn, {"end": end})
        run = claim_one(conn)
        if end == "done":
            operations.complete_jobs(conn, [run])
        elif end == "failed":
            operations.fail_jobs(conn, [(run, "boom")])
        else:
            operations.release_jobs(conn, [run])
            assert pgbeat.cancel(conn, "remind", "u1") == pgbeat.Cancelled(job_id, False)
        ended.append(job_id)
    fresh = remind(conn, {"end": None})
    assert fresh not in ended
    statuses = conn.execute("SELECT status, job_key FROM jobs ORDER BY id").fetchall()
    assert statuses == [
        ("done", "u1"),
        ("failed", "u1"),
        ("cancelled", "u1"),
        ("pending", "u1"),
    ]  # finished rows keep their key as history


def test_the_same_key_in_two_kinds_is_two_jobs(conn: psycopg.Connection[Any]) -> None:
    a = pgbeat.enqueue(conn, "remind", {}, job_key="u1")
    b = pgbeat.enqueue(conn, "digest", {}, job_key="u1")
    assert isinstance(a, int) and isinstance(b, int) and a != b


def test_max_wait_stops_a_debounce_from_starving(conn: psycopg.Connection[Any]) -> None:
    cap = timedelta(minutes=30)
    first = remind(conn, {"n": 0}, delay=timedelta(minutes=10), on_conflict="keep_latest")
    for n in range(1, 100):
        conn.execute("SELECT pg_sleep(0.001)")  # now() moves on between the calls
        again = remind(
            conn, {"n": n}, delay=timedelta(minutes=10 + n), on_conflict="replace", max_wait=cap
        )
        assert again == first
    found = row(conn, first)
    assert found["payload"] == {"n": 99}
    assert found["wait"] == cap  # created_at (the first request) + max_wait, not later
    # a first request is capped too
    other = pgbeat.enqueue(conn, "remind", {}, job_key="u2", delay=2 * HOUR, max_wait=HOUR)
    assert row(conn, other)["wait"] == HOUR


def test_replace_gives_a_full_budget_and_fences_out_a_reaped_run(
    conn: psycopg.Connection[Any],
) -> None:
    job_id = remind(conn, {"v": 1}, max_attempts=3)
    stale = claim_one(conn)
    conn.execute("UPDATE jobs SET locked_until = now() - interval '1 second'")
    assert operations.reap_expired(conn) == [(job_id, "remind", "pending")]
    assert remind(conn, {"v": 2}, on_conflict="replace", max_attempts=3) == job_id
    found = row(conn, job_id)
    assert (found["attempts"], found["max_attempts"]) == (2, 5)  # moved on, 3 more to go
    operations.complete_jobs(conn, [stale])  # the reaped run ends late, with the old values
    assert row(conn, job_id)["status"] == "pending"  # the new values have not run yet
    run = claim_one(conn)
    assert (run.payload, run.attempt) == ({"v": 2}, 3)


# -- a superseded run never runs again --------------------------------------------------------


def superseded_run(conn: psycopg.Connection[Any], **claim: Any) -> tuple[Job, int]:
    """A running keyed job that a replace superseded; returns its run and the new job's id."""
    remind(conn, {"v": 1}, max_attempts=5)
    run = claim_one(conn, **claim)
    newer = remind(conn, {"v": 2}, delay=HOUR, on_conflict="replace")
    assert isinstance(newer, int)
    return run, newer


@pytest.mark.parametrize("ending", ["retry", "release", "reap", "fail", "complete"])
def test_a_superseded_run_ends_cancelled_or_as_it_ended(
    conn: psycopg.Connection[Any], ending: str
) -> None:
    run, newer = superseded_run(conn)
    if ending == "retry":
        operations.retry_jobs(conn, [(run, "ValueError: boom", timedelta(0))])
    elif ending == "release":
        operations.release_jobs(conn, [run])
    elif ending == "reap":
        conn.execute("UPDATE jobs SET locked_until = now() - interval '1 second'")
        assert operations.reap_expired(conn) == [(run.id, "remind", "cancelled")]
    elif ending == "fail":
        operations.fail_jobs(conn, [(run, "PermanentError: no")])
    else:
        operations.complete_jobs(conn, [run])
    expected = {"fail": "failed", "complete": "done"}.get(ending, "cancelled")
    old = row(conn, run.id)
    assert old["status"] == expected
    assert old["last_error"].startswith(
        "PermanentError" if ending == "fail" else "superseded while running"
    )
    if ending == "retry":
        assert old["last_error"].endswith("; ValueError: boom")
    assert live_rows(conn) == [(newer, "pending")]
    assert operations.claim_jobs(conn, 10, LEASE, None) == []  # the old one never comes back


@pytest.fixture
def reminders() -> tuple[pgbeat.Registry, list[Any]]:
    """A registry whose "remind" handler notes each payload it runs, and runs {"v": 1} until
    it is cancelled (past the timeout, or at shutdown); the payloads it ran."""
    registry = pgbeat.Registry()
    seen: list[Any] = []

    @registry.handler("remind")
    def handler(payload: Any, job: pgbeat.JobContext) -> None:
        seen.append(payload)
        if payload == {"v": 1}:
            job.cancelled.wait(10)

    return registry, seen


@pytest.mark.slow
def test_a_worker_does_not_retry_a_superseded_job_that_times_out(
    database_url: str, conn: psycopg.Connection[Any], reminders: tuple[pgbeat.Registry, list[Any]]
) -> None:
    registry, seen = reminders
    first = remind(conn, {"v": 1})  # outlives the timeout
    settings = {"timeout": timedelta(milliseconds=500), "lease": LEASE}
    with running_worker(database_url, registry, **settings):
        wait_until(lambda: row(conn, first)["status"] == "running")
        newer = remind(conn, {"v": 2}, on_conflict="replace")
        wait_until(lambda: row(conn, newer)["status"] == "done")
        wait_until(lambda: row(conn, first)["status"] != "running")
    assert row(conn, first)["status"] == "cancelled"
    assert "TimedOut" in row(conn, first)["last_error"]
    assert seen == [{"v": 1}, {"v": 2}]


@pytest.mark.slow
def test_a_superseded_job_released_at_shutdown_is_not_run_again(
    database_url: str, conn: psycopg.Connection[Any], reminders: tuple[pgbeat.Registry, list[Any]]
) -> None:
    registry, seen = reminders
    first = remind(conn, {"v": 1})  # still running when the worker stops
    with running_worker(database_url, registry, grace=timedelta(milliseconds=200), lease=LEASE):
        wait_until(lambda: row(conn, first)["status"] == "running")
        newer = remind(conn, {"v": 2}, delay=HOUR, on_conflict="replace")
    released = row(conn, first)
    assert released["status"] == "cancelled"
    assert released["last_error"].endswith("; released at shutdown")
    assert live_rows(conn) == [(newer, "pending")]
    assert seen == [{"v": 1}]


def wait_until(condition: Any) -> None:
    wait_for(condition, timeout=15)


# -- cancel, reschedule, find ---------------------------------------------------------------


def test_cancel_a_pending_job(conn: psycopg.Connection[Any]) -> None:
    job_id = remind(conn, {}, delay=HOUR)
    assert pgbeat.cancel(conn, "remind", "u1", reason="profile finished") == pgbeat.Cancelled(
        job_id, was_running=False
    )
    found = row(conn, job_id)
    assert (found["status"], found["last_error"]) == ("cancelled", "cancelled: profile finished")
    assert pgbeat.cancel(conn, "remind", "u1") is None
    assert pgbeat.find(conn, "remind", "u1") is None


def test_cancel_a_running_job_stops_its_retries(conn: psycopg.Connection[Any]) -> None:
    job_id = remind(conn, {})
    run = claim_one(conn)
    assert pgbeat.cancel(conn, "remind", "u1") == pgbeat.Cancelled(job_id, was_running=True)
    assert pgbeat.find(conn, "remind", "u1") is None
    operations.retry_jobs(conn, [(run, "boom", timedelta(0))])
    found = row(conn, job_id)
    assert found["status"] == "cancelled"
    assert found["last_error"] == "cancelled by pgbeat.cancel(); boom"


def test_a_rolled_back_cancel_leaves_the_reminder(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        job_id = remind(conn, {})
        conn.commit()
        with pytest.raises(RuntimeError), conn.transaction():
            assert pgbeat.cancel(conn, "remind", "u1") is not None
            raise RuntimeError("the request failed")
        assert row(conn, job_id)["status"] == "pending"


def test_reschedule_moves_only_a_pending_job(conn: psycopg.Connection[Any]) -> None:
    assert pgbeat.reschedule(conn, "remind", "u1", delay=HOUR) is None
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)  # never inserts
    job_id = remind(conn, {}, delay=timedelta(minutes=1))
    at = datetime(2031, 5, 1, 9, tzinfo=UTC)
    assert pgbeat.reschedule(conn, "remind", "u1", run_at=at) == job_id
    assert row(conn, job_id)["run_at"] == at
    assert pgbeat.reschedule(conn, "remind", "u1", delay=HOUR) == job_id
    assert row(conn, job_id)["wait"] > timedelta(minutes=59)
    conn.execute("UPDATE jobs SET run_at = now()")
    claim_one(conn)
    assert pgbeat.reschedule(conn, "remind", "u1", delay=HOUR) is None


@pytest.mark.slow
def test_reschedule_wakes_idle_workers_at_commit(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN pgbeat_jobs")
        with psycopg.connect(database_url) as conn:
            remind(conn, {}, delay=HOUR)
            conn.commit()
            list(listener.notifies(timeout=0.5, stop_after=1))  # the insert's notification
            pgbeat.reschedule(conn, "remind", "u1", delay=timedelta(0))
            assert list(listener.notifies(timeout=0.2, stop_after=1)) == []  # not before commit
            conn.commit()
        assert [n.channel for n in listener.notifies(timeout=5, stop_after=1)] == ["pgbeat_jobs"]


def test_find_returns_the_live_job(conn: psycopg.Connection[Any]) -> None:
    assert pgbeat.find(conn, "remind", "u1") is None
    job_id = remind(conn, {"v": 1}, max_attempts=3)
    found = pgbeat.find(conn, "remind", "u1")
    assert isinstance(found, pgbeat.LiveJob)
    assert (found.id, found.status, found.payload, found.attempts, found.max_attempts) == (
        job_id,
        "pending",
        {"v": 1},
        0,
        3,
    )
    claim_one(conn)
    found = pgbeat.find(conn, "remind", "u1")
    assert found is not None and found.status == "running"


def test_the_documented_example_runs_as_written(conn: psycopg.Connection[Any]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "job-keys.md").read_text()
    found = re.search(r"```python\n(.*?)\n```", page, re.DOTALL)
    assert found is not None
    namespace: dict[str, Any] = {"tx": conn}
    exec(compile(found.group(1), "docs/job-keys.md", "exec"), namespace)
    assert namespace["job"] is None  # cancelled, then nothing to reschedule or find
    ((status, reason),) = conn.execute("SELECT status, last_error FROM jobs").fetchall()
    assert (status, reason) == ("cancelled", "cancelled: profile finished")


# -- enqueue_many -----------------------------------------------------------------------------


def test_enqueue_many_with_repeated_keys_keeps_the_last(conn: psycopg.Connection[Any]) -> None:
    existing = remind(conn, {"v": "old"}, delay=HOUR)
    jobs = [
        pgbeat.NewJob("remind", {"v": v}, job_key=f"u{v % 3}", on_conflict="replace")
        for v in range(9)
    ]
    jobs += [pgbeat.NewJob("plain", {"n": 1}), pgbeat.NewJob("plain", {"n": 2}, unique_key="x")]
    jobs += [pgbeat.NewJob("remind", {"v": "ignored"}, job_key="u1")]
    ids = pgbeat.enqueue_many(conn, jobs)
    keyed = dict(
        conn.execute(
            "SELECT job_key, payload->'v' FROM jobs "
            "WHERE job_key IS NOT NULL AND status = 'pending'"
        ).fetchall()
    )
    # only the last job of a key counts: u1's is an ignore, so v=1, 4 and 7 never land
    assert keyed == {"u0": 6, "u1": "old", "u2": 8}
    assert existing not in ids and len(ids) == 4  # two plain jobs, u0 and u2


@pytest.mark.parametrize(
    "bad",
    [
        {"job_key": "k", "unique_key": "k"},
        {"on_conflict": "replace"},
        {"max_wait": HOUR},
        {"job_key": "k", "on_conflict": "upsert"},
        {"job_key": "", "on_conflict": "replace"},
        {"job_key": "k", "max_wait": -HOUR},
    ],
)
def test_meaningless_options_are_refused(conn: psycopg.Connection[Any], bad: Any) -> None:
    with pytest.raises(ValueError):
        pgbeat.enqueue(conn, "remind", {}, **bad)
    with pytest.raises(ValueError):
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("remind", {}, **bad)])
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_async_forms(database_url: str) -> None:
    async def scenario() -> tuple[Any, ...]:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            first = await pgbeat.enqueue(aconn, "remind", {"v": 1}, job_key="u1", delay=HOUR)
            same = await pgbeat.enqueue_async(
                aconn, "remind", {"v": 2}, job_key="u1", on_conflict="replace", delay=HOUR
            )
            moved = await pgbeat.reschedule(aconn, "remind", "u1", delay=2 * HOUR)
            found = await pgbeat.find_async(aconn, "remind", "u1")
            many = await pgbeat.enqueue_many_async(
                aconn, [pgbeat.NewJob("remind", {"v": 3}, job_key="u1", on_conflict="replace")]
            )
            cancelled = await pgbeat.cancel_async(aconn, "remind", "u1")
            gone = await pgbeat.find(aconn, "remind", "u1")
            return first, same, moved, found, many, cancelled, gone

    first, same, moved, found, many, cancelled, gone = asyncio.run(scenario())
    assert first == same == moved == found.id and many == [first]
    assert found.payload == {"v": 2}
    assert cancelled == pgbeat.Cancelled(first, was_running=False)
    assert gone is None


# -- retry and purge with keys ----------------------------------------------------------------


def failed_keyed(conn: psycopg.Connection[Any], key: str, payload: Any) -> int:
    job_id = pgbeat.enqueue(conn, "remind", payload, job_key=key)
    run = claim_one(conn)
    assert run.id == job_id
    operations.fail_jobs(conn, [(run, "boom")])
    return int(job_id)


def test_retry_failed_revives_one_job_per_key_and_none_whose_key_is_live(
    conn: psycopg.Connection[Any],
) -> None:
    older = failed_keyed(conn, "a", {"n": 1})
    newer = failed_keyed(conn, "a", {"n": 2})
    taken = failed_keyed(conn, "b", {"n": 3})
    holder = pgbeat.enqueue(conn, "remind", {"n": 4}, job_key="b", delay=HOUR)
    plain = pgbeat.enqueue(conn, "plain", {})
    run = claim_one(conn)
    operations.fail_jobs(conn, [(run, "boom")])
    retried = actions.retry_failed(conn, None)
    assert plain is not None
    assert sorted(retried.ids) == sorted([newer, plain])
    assert retried.kept == 2
    assert {r[0] for r in conn.execute("SELECT id FROM jobs WHERE status = 'failed'")} == {
        older,
        taken,
    }
    with pytest.raises(pgbeat.PgbeatError, match=f"job {holder} is the live job"):
        actions.retry_job(conn, taken)
    pgbeat.cancel(conn, "remind", "b")
    actions.retry_job(conn, taken)  # the key is free again
    assert row(conn, taken)["status"] == "pending"


@pytest.mark.slow
def test_cli_retry_failed_reports_the_jobs_whose_key_is_live(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    failed_keyed(conn, "a", {})
    failed_keyed(conn, "a", {})
    result = run_cli(["jobs", "retry", "--failed"], database_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "1 failed jobs back to pending",
        "1 stay failed: one job per job key comes back, if none is live",
    ]


def test_a_revived_superseded_job_holds_its_key_again(conn: psycopg.Connection[Any]) -> None:
    run, newer = superseded_run(conn)
    operations.release_jobs(conn, [run])
    assert pgbeat.cancel(conn, "remind", "u1") == pgbeat.Cancelled(newer, False)
    actions.retry_job(conn, run.id)
    found = row(conn, run.id)
    assert (found["status"], found["superseded_at"]) == ("pending", None)
    live = pgbeat.find(conn, "remind", "u1")
    assert live is not None and live.id == run.id


def test_cancelled_is_no_failure_and_is_purged(conn: psycopg.Connection[Any]) -> None:
    remind(conn, {})
    pgbeat.cancel(conn, "remind", "u1")
    stats = actions.stats(conn)
    assert stats.totals()["cancelled"] == 1
    assert stats.totals()["failed"] == 0 and stats.failed_last_hour == 0
    assert reads.list_jobs(conn, status="failed", kind=None, limit=10) == []
    conn.execute("UPDATE jobs SET finished_at = now() - interval '2 days'")
    assert actions.purge_jobs(conn, timedelta(days=1)) == 1


# -- the command line -------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_enqueue_and_cancel_by_key(database_url: str, conn: psycopg.Connection[Any]) -> None:
    def enqueue(*extra: str) -> Any:
        return run_cli(["enqueue", "remind", "--job-key", "u1", *extra], database_url)

    first = enqueue("--payload", '{"v": 1}', "--in", "1h")
    assert first.returncode == 0, first.stderr
    job_id = int(first.stdout)
    ignored = enqueue("--payload", '{"v": 2}')
    assert (ignored.returncode, ignored.stdout) == (0, "")
    assert "job key 'u1' is live" in ignored.stderr
    replaced = enqueue("--payload", '{"v": 3}', "--on-conflict", "replace", "--max-wait", "2h")
    assert int(replaced.stdout) == job_id
    assert row(conn, job_id)["payload"] == {"v": 3}

    cancelled = run_cli(["jobs", "cancel", "--kind", "remind", "--key", "u1"], database_url)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() == f"job {job_id} cancelled"
    assert row(conn, job_id)["last_error"].startswith("cancelled: pgbeat jobs cancel, by ")
    again = run_cli(["jobs", "cancel", "--kind", "remind", "--key", "u1"], database_url)
    assert again.returncode == 1
    assert again.stderr.strip().endswith("no live remind job with job key 'u1'")
    listed = run_cli(["jobs", "list", "--status", "cancelled", "--json"], database_url)
    assert [(r["id"], r["job_key"]) for r in json.loads(listed.stdout)] == [(job_id, "u1")]


@pytest.mark.slow
def test_cli_cancel_by_key_of_a_running_job(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    job_id = remind(conn, {})
    claim_one(conn)
    result = run_cli(["jobs", "cancel", "--kind", "remind", "--key", "u1"], database_url)
    assert result.returncode == 0, result.stderr
    assert f"job {job_id} is running" in result.stdout and "ends cancelled" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["enqueue", "r", "--job-key", "k", "--unique-key", "u"], "not both"),
        (["enqueue", "r", "--on-conflict", "replace"], "go with --job-key"),
        (["enqueue", "r", "--job-key", "k", "--on-conflict", "upsert"], "invalid choice"),
        (["jobs", "cancel"], "give a job ID, or --kind and --key"),
        (["jobs", "cancel", "--key", "k"], "give a job ID, or --kind and --key"),
        (["jobs", "cancel", "1", "--kind", "r", "--key", "k"], "give a job ID, or --kind"),
    ],
)
@pytest.mark.slow
def test_cli_bad_key_input_is_one_line(database_url: str, args: list[str], fragment: str) -> None:
    result = run_cli(args, database_url)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert fragment in result.stderr
