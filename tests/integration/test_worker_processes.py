"""Real `pgbeat worker` processes: kill -9 loses nothing, SIGTERM finishes the running job."""

from __future__ import annotations

import os
import signal
import socket
import sys
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbeat
from tests.apps.jobs_app import SETUP
from tests.helpers import (
    PROCESS_START,
    CliProcess,
    cli_env,
    run_cli,
    start_cli,
    statuses,
    wait_for,
)

ROOT = str(Path(__file__).resolve().parents[2])
APP = "tests.apps.jobs_app:registry"


def count(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def app_tables(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    conn.execute(SETUP.encode())
    return conn


@pytest.mark.slow
def test_kill_9_mid_run_loses_no_job(
    database_url: str, app_tables: psycopg.Connection[Any]
) -> None:
    conn = app_tables
    total = 300
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("effect", {"sleep": 0.02}) for _ in range(total)])
    flags = ["--concurrency", "8", "--lease", "2s", "--timeout", "1s"]
    first = start_cli(["worker", APP, *flags], database_url, cwd=ROOT)
    try:
        wait_for(
            lambda: count(conn, "SELECT count(*) FROM effects") >= 40,
            timeout=PROCESS_START,
            message="the first worker made progress",
        )
        first.kill()  # SIGKILL mid-run: jobs are left `running` under their lease
        first.wait(10)
        stranded = count(conn, "SELECT count(*) FROM jobs WHERE status = 'running'")
        second = start_cli(["worker", APP, *flags], database_url, cwd=ROOT)
        try:
            wait_for(
                lambda: statuses(conn) == {"done": total},
                timeout=90,
                interval=0.1,
                message="every job done",
            )
        finally:
            output = second.stop()
    finally:
        first.stop(signal.SIGKILL)
    assert stranded > 0, "the kill did not interrupt any job; the test proved nothing"
    assert count(conn, "SELECT count(*) FROM effects") == total
    reruns = count(conn, "SELECT count(*) FROM executions") - total
    assert 0 < reruns <= stranded + 8
    assert "lease expired" in output


@pytest.mark.slow
def test_sigterm_lets_the_running_job_finish(
    database_url: str, app_tables: psycopg.Connection[Any], started: list[CliProcess]
) -> None:
    conn = app_tables
    job_id, worker = _terminated_in_a_job(database_url, conn, started, 2, "--grace", "10s")
    wait_for(lambda: "received SIGTERM" in worker.output(), message="SIGTERM handled")
    late_id = pgbeat.enqueue(conn, "effect", {"sleep": 0})  # must not be claimed now
    assert worker.wait(20) == 0, worker.output()
    assert statuses(conn) == {"done": 1, "pending": 1}
    row = conn.execute("SELECT status FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == ("done",)
    assert count(conn, "SELECT count(*) FROM effects") == 1
    late = conn.execute("SELECT status, attempts FROM jobs WHERE id = %s", (late_id,)).fetchone()
    assert late == ("pending", 0)


@pytest.mark.slow
def test_sigterm_past_grace_returns_the_job_to_pending(
    database_url: str, app_tables: psycopg.Connection[Any], started: list[CliProcess]
) -> None:
    conn = app_tables
    flags = ("--grace", "300ms", "--timeout", "30s")
    job_id, worker = _terminated_in_a_job(database_url, conn, started, 20, *flags)
    assert worker.wait(20) == 0, worker.output()
    output = worker.output()
    row = conn.execute(
        "SELECT status, attempts, locked_until FROM jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row == ("pending", 0, None)
    assert "returning 1 unfinished jobs to pending" in output


def test_worker_with_unreachable_database_exits_1_in_one_line() -> None:
    result = run_cli(["worker", APP], "postgresql://u:hunter2@127.0.0.1:1/db", cwd=ROOT)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "database unavailable" in result.stderr
    assert "hunter2" not in result.stderr


@pytest.mark.parametrize(
    ("app", "fragment"),
    [
        ("no_such_module:registry", "cannot import"),
        ("tests.apps.jobs_app:nothing", "not a pgbeat.Registry"),
        ("justamodule", "module:attribute"),
    ],
)
@pytest.mark.slow
def test_worker_with_bad_app_exits_1_in_one_line(
    database_url: str, app: str, fragment: str
) -> None:
    result = run_cli(["worker", app], database_url, cwd=ROOT)
    assert result.returncode == 1
    assert fragment in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.slow
def test_worker_takes_a_timeout_longer_than_its_lease(database_url: str) -> None:
    """Leases are renewed while jobs run: a 2-hour timeout needs no 2-hour lease."""
    worker = start_cli(["worker", APP, "--lease", "10s", "--timeout", "2h"], database_url, cwd=ROOT)
    try:
        wait_for(
            lambda: "worker started" in worker.output(), timeout=PROCESS_START, message="the start"
        )
    finally:
        output = worker.stop()
    assert "lease=10s timeout=7200s" in output, output


@pytest.mark.slow
def test_processes_flag_runs_and_restarts_children(
    database_url: str, app_tables: psycopg.Connection[Any]
) -> None:
    conn = app_tables
    supervisor = start_cli(
        ["worker", APP, "--processes", "2", "--concurrency", "4"], database_url, cwd=ROOT
    )
    try:
        workers = wait_for(  # both children's loops run before any job exists
            lambda: (
                [
                    r[0]
                    for r in conn.execute("SELECT pid FROM pgbeat_processes WHERE role = 'worker'")
                ]
                if count(conn, "SELECT count(*) FROM pgbeat_processes WHERE role = 'worker'") == 2
                else []
            ),
            timeout=PROCESS_START,
            message="two worker heartbeats",
        )
        # 1.5 s of work for one child's 4 slots: the other takes its share on its wake-up
        # (a notification, or its 1 s poll at the latest)
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("effect", {"sleep": 0.05}) for _ in range(120)])
        wait_for(lambda: statuses(conn) == {"done": 120}, timeout=60, message="all done")
        pids = {row[0] for row in conn.execute("SELECT DISTINCT pid FROM effects")}
        os.kill(workers[0], signal.SIGKILL)  # a crashed child is started again
        wait_for(lambda: "restarting it" in supervisor.output(), timeout=60, message="restart")
        pgbeat.enqueue(conn, "effect", {"sleep": 0})
        wait_for(
            lambda: statuses(conn) == {"done": 121},
            timeout=PROCESS_START,
            message="job after restart",
        )
    finally:
        output = supervisor.stop()
    assert supervisor.returncode == 0, output
    assert len(pids) == 2, "both processes should have run jobs"
    assert count(conn, "SELECT count(*) FROM effects") == 121


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting for a parent that never reaps it is gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _free_port_pair() -> int:
    """A port P such that P and P + 1 are free now (the metrics ports of two children)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port < 65535:
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise AssertionError("no two consecutive free ports")


def _worker_pids(conn: psycopg.Connection[Any]) -> list[int]:
    return [r[0] for r in conn.execute("SELECT pid FROM pgbeat_processes WHERE role = 'worker'")]


@pytest.mark.slow
def test_children_get_no_password_and_stop_when_the_supervisor_is_killed(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    # The server trusts local connections, so any password works; it must never show in ps.
    if "postgres@" not in database_url:  # the embedded server's socket URL has no user part
        pytest.skip("needs a URL with a user part (DATABASE_URL, trust authentication)")
    secret_url = database_url.replace("postgres@", "postgres:s3cret-pw@", 1)
    assert "s3cret-pw" in secret_url
    port = _free_port_pair()
    supervisor = start_cli(
        ["worker", APP, "--processes", "2", "--grace", "2s", "--database-url", secret_url,
         "--metrics-port", str(port)],
        None,
        cwd=ROOT,
    )  # fmt: skip
    pids: list[int] = []
    try:
        pids = wait_for(
            lambda: pids_now if len(pids_now := _worker_pids(conn)) == 2 else [],
            timeout=PROCESS_START,
            message="two worker heartbeats",
        )
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") for pid in pids]
        for command in commands:
            assert not any(b"s3cret-pw" in part for part in command), command
            assert b"--processes" not in command and b"--database-url" not in command
        ports = {int(c[c.index(b"--metrics-port") + 1]) for c in commands}
        assert ports == {port, port + 1}
        for each in ports:
            with urllib.request.urlopen(f"http://127.0.0.1:{each}/metrics", timeout=5) as reply:
                assert reply.status == 200
        supervisor.kill()
        supervisor.wait(10)
        wait_for(
            lambda: not any(_alive(pid) for pid in pids),
            timeout=30,
            message="the children of the killed supervisor to exit",
        )
        # a clean stop deletes the heartbeat row; a killed process's row would linger 30 s
        assert _worker_pids(conn) == []
    finally:
        supervisor.stop(signal.SIGKILL)
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


SHADOW = (
    "from pathlib import Path\n"
    "Path(__file__).with_name('SHADOWED').write_text(__name__)\n"
    "raise SystemExit(3)\n"
)
CWD_APP = (
    "import pgbeat\n"
    "registry = pgbeat.Registry()\n"
    "@registry.handler('noop')\n"
    "def noop(payload: dict) -> None:\n"
    "    pass\n"
)


@pytest.mark.slow
def test_modules_in_the_working_directory_do_not_replace_pgbeat_in_the_children(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    (tmp_path / "pgbeat.py").write_text(SHADOW, encoding="utf-8")
    (tmp_path / "pgserver.py").write_text(SHADOW, encoding="utf-8")
    (tmp_path / "cwd_app.py").write_text(CWD_APP, encoding="utf-8")
    console_script = str(Path(sys.executable).with_name("pgbeat"))
    supervisor = CliProcess(
        [console_script, "worker", "cwd_app:registry", "--processes", "2"],
        cli_env(database_url),
        str(tmp_path),
    )
    try:
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop") for _ in range(10)])
        wait_for(lambda: statuses(conn) == {"done": 10}, timeout=PROCESS_START, message="jobs done")
        wait_for(
            lambda: len(_worker_pids(conn)) == 2, timeout=PROCESS_START, message="two children"
        )
    finally:
        output = supervisor.stop()
    assert not (tmp_path / "SHADOWED").exists(), output
    assert supervisor.returncode == 0, output
    assert "restarting it" not in output


def _terminated_in_a_job(
    url: str, conn: psycopg.Connection[Any], started: list[CliProcess], sleep: int, *flags: str
) -> tuple[int, CliProcess]:
    """A job sleeping ``sleep`` seconds, and a worker started with ``flags`` (killed when the
    test ends) sent SIGTERM once it runs the job (the app records each execution)."""
    job_id = pgbeat.enqueue(conn, "effect", {"sleep": sleep})
    assert job_id is not None
    worker = start_cli(["worker", APP, *flags], url, cwd=ROOT)
    started.append(worker)
    wait_for(
        lambda: count(conn, "SELECT count(*) FROM executions") == 1,
        timeout=PROCESS_START,
        message="the job started",
    )
    worker.send_signal(signal.SIGTERM)
    return job_id, worker
