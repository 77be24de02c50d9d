"""Test helpers: waiting on conditions with deadlines, the real CLI (and other commands) in a
subprocess, the one way to make a throwaway database, and the one way to run a worker or a
scheduler in a thread."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, LiteralString, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

import pgbeat

T = TypeVar("T")

# How long a process may take to start (imports, connect, first heartbeat) on a loaded CI
# machine: a wait for a start or for liveness ends as soon as its condition holds, so a long
# deadline costs nothing when the machine is quiet and keeps a busy one from failing the test.
PROCESS_START = 90.0


def wait_for(
    condition: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition",
    watching: Sequence[CliProcess] = (),
) -> T:
    """Poll ``condition`` until it returns a truthy value; fail the test after ``timeout``.

    ``watching``: processes the condition depends on; one that exits fails the wait at once
    with the end of its output (a worker that could not start is named, not waited out).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        for process in watching:
            if process.popen.poll() is not None:
                code = process.wait(5)  # and its last lines read
                raise AssertionError(
                    f"waiting for {message}: pid {process.pid} exited {code};"
                    f" the end of its output:\n{process.output()[-2000:]}"
                )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def cli_env(database_url: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


def run_cli(
    args: Sequence[str],
    database_url: str | None,
    timeout: float = 60.0,
    cwd: str | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Run ``pgbeat ARGS`` to completion and capture its output."""
    command = [sys.executable, "-m", "pgbeat", *args]
    return run_process(command, cwd, cli_env(database_url, **env), timeout)


def run_cli_here(
    args: Sequence[str], database_url: str | None, **env: str
) -> subprocess.CompletedProcess[str]:
    """``pgbeat ARGS`` run by ``main()`` in this process, its exit code and output captured
    as ``run_cli`` gives them: no interpreter to start (a tenth of a second where a process
    takes one or more on a busy machine). For what only a process shows (signals, pipes,
    encodings, ``python -m pgbeat`` itself) use ``run_cli``."""
    from pgbeat.cli.main import main  # here: most tests never load the CLI

    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(cli_env(database_url, **env))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse: usage errors
                code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def run_cli_at_once(
    args: Sequence[str], database_url: str, count: int, timeout: float = 120, **env: str
) -> list[tuple[str, str]]:
    """``pgbeat ARGS`` in ``count`` processes started together (replicas racing), each of
    which must exit 0; what each printed, (stdout, stderr)."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "pgbeat", *args],
            env=cli_env(database_url, **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    outputs = [p.communicate(timeout=timeout) for p in processes]
    assert [p.returncode for p in processes] == [0] * count, outputs
    return outputs


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (for a server a test starts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def lock_waiters(conn: psycopg.Connection[Any]) -> int:
    """How many sessions on ``conn``'s database wait for a lock: the way to know a racing
    statement reached its wait, without sleeping."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        " AND datname = current_database()"
    ).fetchone()
    return int(row[0]) if row else 0


def run_process(
    command: Sequence[str | Path],
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` to its end (with this process's environment unless ``env`` is given),
    its output captured as text."""
    return subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
    )


def run_ok(
    command: Sequence[str | Path],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> str:
    """``command`` run by ``run_process``, which must exit 0; what it printed on stdout."""
    done = run_process(command, cwd, env, timeout)
    assert done.returncode == 0, f"{command}: {done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def run_python(script: str, url: str, timeout: float = 120) -> str:
    """``python -c SCRIPT URL`` in a process of its own (a fresh interpreter: nothing this
    one imported or configured), which must exit 0; what it printed."""
    return run_ok([sys.executable, "-c", script, url], timeout=timeout)


class CliProcess:
    """A background ``pgbeat`` process whose output is collected as it comes."""

    def __init__(self, command: Sequence[str], env: dict[str, str], cwd: str | None) -> None:
        self.popen = subprocess.Popen(
            list(command),
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        with self.popen.stdout:
            for line in self.popen.stdout:
                self._lines.append(line)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    def output(self) -> str:
        return "".join(self._lines)

    def send_signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float = 30.0) -> int:
        code = self.popen.wait(timeout=timeout)
        self._reader.join(timeout=5)
        return code

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> str:
        """Signal the process (if alive), wait for it, return everything it printed."""
        self.send_signal(sig)
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.wait(10)
        return self.output()


def start_cli(
    args: Sequence[str], database_url: str | None, cwd: str | None = None, **env: str
) -> CliProcess:
    """Start ``pgbeat ARGS`` in the background (stdout and stderr collected together)."""
    return CliProcess([sys.executable, "-m", "pgbeat", *args], cli_env(database_url, **env), cwd)


def schedules_toml(directory: Path, text: str) -> Path:
    """A schedules file (``schedules.toml``) in ``directory`` holding ``text``."""
    path = directory / "schedules.toml"
    path.write_text(text, encoding="utf-8")
    return path


def statuses(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall()
    return {status: count for status, count in rows}


_END_JOBS: LiteralString = """
WITH ended AS (
    UPDATE jobs SET status = %(status)s, finished_at = now(),
                    result = coalesce(%(result)s::jsonb, result)
    WHERE id = ANY(%(ids)s::bigint[])
    RETURNING id, status, workflow_id
)"""
_ENDED_COUNT: LiteralString = """
SELECT count(*) FROM ended, advanced"""


def end_jobs(
    conn: psycopg.Connection[Any], ids: Sequence[int], status: str, result: str | None = None
) -> int:
    """End jobs as pgbeat's own statements end them (a worker's outcome, a cancel): the
    update and the advance of the workflow steps it ended, in one statement
    (db/sql/ended_steps.py). An UPDATE by hand advances nothing (the repair pass's to find).
    Returns the rows ended."""
    from pgbeat.db.sql.ended_steps import _ADVANCED

    statement = _END_JOBS + _ADVANCED + _ENDED_COUNT
    params = {"ids": list(ids), "status": status, "result": result}
    row = conn.execute(statement, params).fetchone()
    assert row is not None
    return int(row[0])


def claim_statements() -> dict[str, LiteralString]:
    """Every claim statement of ``db/sql/jobs/claim.py``, ``claim_limited.py`` and
    ``claim_after.py`` (``JOBS_CLAIM...``) by its name."""
    from pgbeat.db.sql.jobs import claim, claim_after, claim_limited

    return {
        name: text
        for module in (claim, claim_limited, claim_after)
        for name, text in vars(module).items()
        if name.startswith("JOBS_CLAIM")
    }


def plan_nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every node of an ``EXPLAIN (FORMAT JSON)`` plan, the given one first."""
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


def sorts_backlog(plan: str) -> bool:
    """Whether a Sort reads pending jobs straight from the table or a claim index (sorts
    of the running rows, or of the backlog's bounded head, are no sort of the backlog)."""
    lines = plan.splitlines()
    return "Seq Scan on jobs" in plan or any(
        "Sort" in line
        and any(("jobs_claim" in b or "jobs_ready" in b) for b in lines[i + 1 : i + 3])
        for i, line in enumerate(lines)
    )


# -- databases ------------------------------------------------------------------------------


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name`` instead (URLs and key=value strings alike)."""
    parts = urlsplit(url)
    if parts.scheme.startswith("postgres"):
        return urlunsplit(parts._replace(path="/" + name))
    return psycopg.conninfo.make_conninfo(url, dbname=name)


def create_database(
    admin: psycopg.Connection[Any], template: str | None = None, prefix: str = "pgbeat_t"
) -> str:
    """Create a database (cloned from ``template`` if given) on ``admin``; return its name."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    clone = sql.SQL(" TEMPLATE {}").format(sql.Identifier(template)) if template else sql.SQL("")
    admin.execute(sql.SQL("CREATE DATABASE {}{}").format(sql.Identifier(name), clone))
    return name


def drop_database(admin: psycopg.Connection[Any], name: str) -> None:
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@contextmanager
def temporary_database(
    server_url: str, template: str | None = None, prefix: str = "pgbeat_t"
) -> Iterator[str]:
    """A new database on ``server_url``'s server (a clone of ``template`` if given): its URL,
    dropped when the block ends, however it ends."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        name = create_database(admin, template, prefix)
    try:
        yield with_database(server_url, name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            drop_database(admin, name)


# -- a worker (or a scheduler) in a thread ----------------------------------------------------

FAST_BACKOFF = pgbeat.BackoffPolicy(base=timedelta(milliseconds=10), cap=timedelta(milliseconds=50))


class Service(Protocol):
    """What runs until told to stop: a ``pgbeat.Worker``, a ``Scheduler``."""

    def run(self) -> None: ...

    def stop(self) -> None: ...


@contextmanager
def in_thread(service: Service, join: float = 30) -> Iterator[threading.Thread]:
    """``service.run()`` in a thread of this process until the block ends (then stopped,
    and checked to have stopped within ``join`` seconds): the one way tests run a worker or
    a scheduler beside them. The thread is given for checks that it is still alive."""
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        service.stop()
        thread.join(timeout=join)
        assert not thread.is_alive(), f"the {type(service).__name__.lower()} did not stop"


def until_cancelled(heard: threading.Event, seconds: float = 60) -> Callable[[Any], Any]:
    """An async handler that sleeps ``seconds`` unless cancelled, and sets ``heard`` when its
    task is cancelled."""

    async def handler(payload: Any) -> None:
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            heard.set()
            raise

    return handler


def noop_registry(*kinds: str) -> pgbeat.Registry:
    """A registry whose handlers of ``kinds`` do nothing."""
    registry = pgbeat.Registry()
    for kind in kinds:
        registry.register(kind, lambda payload: None)
    return registry


@contextmanager
def running_worker(url: str, registry: pgbeat.Registry, **settings: Any) -> Iterator[pgbeat.Worker]:
    """A ``pgbeat.Worker`` running in a thread of this process until the block ends (then
    stopped, and checked to have stopped). ``settings`` are ``WorkerSettings`` fields;
    retries back off in milliseconds unless ``backoff`` is given."""
    settings.setdefault("backoff", FAST_BACKOFF)
    worker = pgbeat.Worker(url, registry, pgbeat.WorkerSettings(**settings))
    with in_thread(worker):
        yield worker


REPO_ROOT = Path(__file__).resolve().parents[1]


def run_bench(server_url: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """``python -m <args>`` (a benchmark) from the repository's root against ``server_url``."""
    env = {**os.environ, "DATABASE_URL": server_url, "PYTHONUNBUFFERED": "1"}
    return run_process([sys.executable, "-m", *args], REPO_ROOT, env, timeout)


@contextmanager
def uncommitted(url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection inside a transaction that is rolled back at the end, never committed
    (blocks inside it are savepoints): an application's test as ``pgbeat.testing`` sees it."""
    with psycopg.connect(url) as conn:
        conn.execute("SELECT 1")  # opens the transaction
        yield conn
        conn.rollback()
