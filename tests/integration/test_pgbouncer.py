"""pgbeat through pgbouncer in transaction pooling mode, with ``PGBEAT_POOLER=transaction``.

A pgbouncer of the tests' own (tests/pgbouncer.py) sits in front of the test PostgreSQL.
Consecutive transactions of one client run on different server connections there, so any
session state pgbeat kept (startup options, a session lock, a prepared statement, LISTEN)
would fail or go astray: these tests run the queue's core, the CLI, four scheduler
replicas under kill -9, and workers while pgbouncer itself crashes and comes back.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

import pgbeat
from pgbeat.scheduling.file import parse_schedules
from pgbeat.ui.settings import UiSettings
from pgbeat.ui.store import Store
from pgbeat.worker import operations
from tests.apps.chaos_app import SETUP
from tests.chaos.harness import Fleet, audit_effects, audit_periods, inconsistent_rows, poll_until
from tests.helpers import (
    PROCESS_START,
    run_cli,
    running_worker,
    schedules_toml,
    statuses,
    wait_for,
)
from tests.pgbouncer import Pgbouncer, unavailable_reason

POOLED = "transaction"  # PGBEAT_POOLER for the CLI behind pgbouncer


@pytest.fixture
def pooled_url(bouncer: Pgbouncer, database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test's database through pgbouncer, with pgbeat told so (PGBEAT_POOLER)."""
    monkeypatch.setenv("PGBEAT_POOLER", "transaction")
    return bouncer.url(database_url)


def pooled_connection(url: str) -> psycopg.Connection[Any]:
    """An application's connection through pgbouncer: no prepared statements, as psycopg's
    documentation asks for transaction pooling."""
    return psycopg.connect(url, autocommit=True, prepare_threshold=None)


def pooled_worker(url: str, registry: pgbeat.Registry, **settings: Any) -> Any:
    """A worker in a thread, polling every 100 ms (tests.helpers.running_worker)."""
    settings.setdefault("poll_interval", timedelta(milliseconds=100))
    return running_worker(url, registry, **settings)


# -- the queue's core ----------------------------------------------------------------------------


def test_transactional_enqueue_through_pgbouncer(pooled_url: str, database_url: str) -> None:
    with pooled_connection(pooled_url) as conn:
        conn.execute("CREATE TABLE users (id bigserial PRIMARY KEY, email text)")
        for n in range(10):  # past psycopg's prepare threshold, were it on
            with conn.transaction():
                user = conn.execute("INSERT INTO users (email) VALUES ('a') RETURNING id")
                row = user.fetchone()
                assert row is not None
                pgbeat.enqueue(conn, "welcome_email", {"user_id": row[0]})
                if n % 2:
                    raise psycopg.Rollback()  # leaves the block, rolled back
        assert statuses(conn) == {"pending": 5}
        users = conn.execute("SELECT count(*) FROM users").fetchone()
        assert users == (5,)


def test_sqlalchemy_session_through_pgbouncer(pooled_url: str) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    from sqlalchemy.orm import Session

    url = pooled_url.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = sqlalchemy.create_engine(url, connect_args={"prepare_threshold": None})
    try:
        for n in range(8):
            with Session(engine) as session, session.begin():
                pgbeat.enqueue(session, "k", {"n": n})
                if n % 2:
                    session.rollback()
    finally:
        engine.dispose()
    with pooled_connection(pooled_url) as conn:
        assert statuses(conn) == {"pending": 4}


@pytest.mark.slow
def test_claim_complete_and_retry_through_pgbouncer(pooled_url: str) -> None:
    registry = pgbeat.Registry()
    failures: dict[int, int] = {}

    @registry.handler("flaky")
    def flaky(payload: dict[str, int]) -> None:
        seen = failures.get(payload["n"], 0)
        if seen < 2:
            failures[payload["n"]] = seen + 1
            raise RuntimeError("not yet")

    @registry.handler("ok")
    def ok(payload: dict[str, int]) -> None:
        pass

    with pooled_connection(pooled_url) as conn:
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("ok", {"n": n}) for n in range(300)])
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("flaky", {"n": n}) for n in range(20)])
        with pooled_worker(pooled_url, registry, concurrency=8) as worker:
            assert worker._listener is None  # LISTEN cannot work through the pooler
            wait_for(lambda: statuses(conn) == {"done": 320}, timeout=30, message="all done")
        attempts = conn.execute("SELECT attempts FROM jobs WHERE kind = 'flaky'").fetchall()
        assert {row[0] for row in attempts} == {3}


@pytest.mark.slow
def test_queue_limits_and_pause_through_pgbouncer(pooled_url: str) -> None:
    """Two workers behind the pooler: the limited claim (row lock, then the claim with its
    transaction-local plan settings) keeps key_concurrency and concurrency, and a paused
    queue starts nothing while the limited one drains."""
    runs: list[tuple[str, float, float]] = []
    lock = threading.Lock()
    registry = pgbeat.Registry()

    @registry.handler("k")
    def k(payload: dict[str, str]) -> None:
        started = time.monotonic()
        time.sleep(0.01)  # the handler's work: long enough for runs of one key to meet
        with lock:
            runs.append((payload["key"], started, time.monotonic()))

    with pooled_connection(pooled_url) as conn:
        pgbeat.configure_queue(conn, "limited", concurrency=3, key_concurrency=1)
        pgbeat.pause_queue(conn, "held")
        jobs = [
            pgbeat.NewJob("k", {"key": f"key{n % 4}"}, queue="limited", limit_key=f"key{n % 4}")
            for n in range(80)
        ]
        pgbeat.enqueue_many(conn, jobs)
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("k", {"key": "held"}, queue="held")] * 5)
        with (
            pooled_worker(pooled_url, registry, concurrency=8),
            pooled_worker(pooled_url, registry, concurrency=8),
        ):
            wait_for(
                lambda: statuses(conn) == {"done": 80, "pending": 5}, timeout=60, message="drained"
            )
    events = sorted(
        [(start, 1, key) for key, start, _ in runs] + [(end, -1, key) for key, _, end in runs]
    )
    running: dict[str, int] = {}
    most = 0
    for _, step, key in events:  # ends sort before starts at the same instant
        running[key] = running.get(key, 0) + step
        assert running[key] <= 1, f"two runs of {key} at once"
        most = max(most, sum(running.values()))
    assert most <= 3
    assert "held" not in {key for key, _, _ in runs}


@pytest.mark.slow
def test_listen_url_wakes_a_pooled_worker(
    pooled_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claims through pgbouncer, LISTEN on the direct URL: a new job is picked up at once,
    not at the next poll (30 s here)."""
    monkeypatch.setenv("PGBEAT_LISTEN_URL", database_url)
    registry = pgbeat.Registry()
    registry.register("k", lambda payload: None)
    running = pooled_worker(pooled_url, registry, poll_interval=timedelta(seconds=30))
    with pooled_connection(pooled_url) as conn, running as worker:
        assert worker._listener is not None
        assert poll_until(worker._listener.connected.is_set, 10)
        time.sleep(0.3)  # the worker's first poll found nothing; the next is in 30 s
        pgbeat.enqueue(conn, "k")
        wait_for(lambda: statuses(conn) == {"done": 1}, timeout=5, message="woken")


@pytest.mark.slow
def test_reaper_through_pgbouncer(pooled_url: str) -> None:
    """A job whose worker vanished (lease expired) is reaped and run again, through the pooler;
    the vanished run's late completion is fenced out by its attempt."""
    registry = pgbeat.Registry()
    registry.register("k", lambda payload: None)
    with pooled_connection(pooled_url) as conn:
        pgbeat.enqueue(conn, "k")
        (lost,) = operations.claim_jobs(conn, 1, timedelta(milliseconds=200), None)
        with pooled_worker(pooled_url, registry, lease=timedelta(seconds=2)):
            wait_for(lambda: statuses(conn) == {"done": 1}, timeout=20, message="reaped, done")
        operations.complete_jobs(conn, [lost])  # the first run's outcome, arriving late
        row = conn.execute("SELECT attempts, status FROM jobs").fetchone()
        assert row == (2, "done")


@pytest.mark.slow
def test_cli_through_pgbouncer(
    bouncer: Pgbouncer, empty_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """migrate (twice at once), enqueue and the admin commands with nothing but the URL and
    --pooler transaction."""
    url = bouncer.url(empty_database_url)
    results: list[Any] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(run_cli(["migrate", "--pooler", "transaction"], url))
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert [r.returncode for r in results] == [0, 0], [r.stderr for r in results]
    for _ in range(2):
        done = run_cli(["enqueue", "k", "--payload", '{"a": 1}'], url, PGBEAT_POOLER=POOLED)
        assert done.returncode == 0, done.stderr
    stats = run_cli(["jobs", "stats"], url, PGBEAT_POOLER=POOLED)
    assert stats.returncode == 0 and "2" in stats.stdout, stats.stdout + stats.stderr
    listed = run_cli(["jobs", "list", "--status", "pending"], url, PGBEAT_POOLER=POOLED)
    assert listed.returncode == 0 and listed.stdout.count("pending") == 2, listed.stdout


# -- replicas and pooler crashes ------------------------------------------------------------------

STORM = """
[defaults]
catch_up = "all"
catch_up_window = "5m"

[schedules.tick]
every = "1s"
"""


@pytest.mark.slow
def test_four_scheduler_replicas_through_pgbouncer_with_kill_9(
    pooled_url: str, tmp_path: Path
) -> None:
    path = schedules_toml(tmp_path, STORM)
    (tick,) = parse_schedules(STORM)
    rng = random.Random(15)
    args = ["scheduler", "--schedules", str(path), "--pooler", "transaction"]
    fleet = Fleet([*args, "--log-level", "WARNING"], pooled_url, 4, rng)
    try:
        deadline = time.monotonic() + 12
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.3, 1.2))
            fleet.kill(rng.randint(1, 2), signal.SIGKILL)
            time.sleep(rng.uniform(0.1, 0.5))
            fleet.restart_dead()
        time.sleep(2)
    finally:
        codes = fleet.stop()
    with pooled_connection(pooled_url) as conn:
        audit = audit_periods(conn, tick)
    assert fleet.kills >= 10
    assert audit.periods >= 12
    assert audit.duplicates == 0, audit.summary()
    assert not audit.missing, audit.summary()
    assert not fleet.tracebacks(), fleet.tracebacks()[0][-3000:]
    assert codes == [0, 0, 0, 0], codes


@pytest.mark.slow
def test_pgbouncer_restarted_under_load_loses_no_job(
    bouncer: Pgbouncer, pooled_url: str, database_url: str
) -> None:
    """Workers through pgbouncer, an enqueuer through it too; pgbouncer is killed and started
    again three times. Every committed job ends done, its effect there exactly once."""
    with psycopg.connect(database_url, autocommit=True) as direct:
        direct.execute(SETUP)
    args = [
        "worker", "tests.apps.chaos_app:registry", "--concurrency", "8", "--lease", "3s",
        "--timeout", "2s", "--poll", "100ms", "--pooler", "transaction", "--log-level", "ERROR",
    ]  # fmt: skip
    fleet = Fleet(args, pooled_url, 2, random.Random(1))
    committed = 0
    stop = threading.Event()

    def enqueue_load() -> None:
        nonlocal committed
        conn: psycopg.Connection[Any] | None = None
        while not stop.is_set():
            try:
                if conn is None or conn.broken or conn.closed:
                    conn = pooled_connection(pooled_url)
                pgbeat.enqueue_many(conn, [pgbeat.NewJob("effect", {"sleep": 0.01})] * 20)
                committed += 20
            except psycopg.OperationalError:  # that batch may or may not have committed
                if conn is not None:
                    conn.close()
                conn = None
                time.sleep(0.05)
            time.sleep(0.02)
        if conn is not None:
            conn.close()

    loader = threading.Thread(target=enqueue_load, daemon=True)
    loader.start()
    try:
        assert poll_until(fleet.ready, PROCESS_START)
        for _ in range(3):
            time.sleep(1.5)
            bouncer.restart(signal.SIGKILL)
        time.sleep(1.5)
        stop.set()
        loader.join(10)
        with psycopg.connect(database_url, autocommit=True) as direct:
            finished = lambda: statuses(direct).keys() <= {"done"}  # noqa: E731
            assert poll_until(finished, PROCESS_START), statuses(direct)
            audit = audit_effects(direct, ["effect"])
            bad = inconsistent_rows(direct)
        assert len(fleet.alive()) == 2
    finally:
        stop.set()
        codes = fleet.stop()
    # a batch whose commit was lost with the connection may exist without being counted
    assert audit.jobs >= committed > 200, (audit.jobs, committed)
    assert audit.lost == 0 and audit.running == 0, audit.summary()
    assert audit.missing_effects == 0 and audit.stray_effects == 0, audit.summary()
    assert not bad, bad
    assert not fleet.tracebacks(), fleet.tracebacks()[0][-3000:]
    assert codes == [0, 0], codes


def test_dashboard_queries_run_under_their_timeout_through_pgbouncer(pooled_url: str) -> None:
    """pgbouncer refuses startup options, so the dashboard sets its timeout per page."""
    store = Store(UiSettings(database_url=pooled_url, statement_timeout_ms=300))
    store.open()
    try:
        with store.connection() as conn:
            row = conn.execute("SHOW statement_timeout").fetchone()
            assert row == ("300ms",)
            with pytest.raises(psycopg.errors.QueryCanceled):
                conn.execute("SELECT pg_sleep(2)")
    finally:
        store.close()


def test_a_dashboard_page_leaves_no_timeout_on_the_pooled_session(
    server_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through one server connection that every client shares (pool size 1), a page's
    timeout must not stay behind for the next client: its SET is local to the page's
    transaction. The control shows that a session-level SET would be seen."""
    from tests.integration.ui_support import dashboard

    reason = unavailable_reason(server_url)  # as the module's bouncer fixture skips
    if reason:
        pytest.skip(reason)
    monkeypatch.setenv("PGBEAT_POOLER", "transaction")
    single = Pgbouncer(server_url, pool_size=1)
    try:
        url = single.url(database_url)
        with pooled_connection(url) as other:
            default = other.execute("SHOW statement_timeout").fetchone()
            assert default is not None and default[0] != "300ms"
            other.execute("SET statement_timeout = '300ms'")  # control: a session SET leaks
            with pooled_connection(url) as next_client:
                assert next_client.execute("SHOW statement_timeout").fetchone() == ("300ms",)
            other.execute("RESET statement_timeout")
        with dashboard(url, statement_timeout_ms=300) as ui:
            page = httpx.get(f"{ui.origin}/jobs", timeout=10)
            assert page.status_code == 200, page.text[:300]
            with pooled_connection(url) as next_client:
                assert next_client.execute("SHOW statement_timeout").fetchone() == default
    finally:
        single.close()
