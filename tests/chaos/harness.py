"""Machinery of the chaos suite: fleets of pgbeat processes, a private PostgreSQL to restart,
fresh databases, and the audits that turn the jobs table into figures and violated promises.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg

from pgbeat.db.migrate import apply_migrations
from pgbeat.scheduling.schedule import Schedule
from tests.chaos.oracle import expected_fires, expected_key
from tests.helpers import PROCESS_START, CliProcess, start_cli, temporary_database, wait_for

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.apps.chaos_app:registry"

Conn = psycopg.Connection[Any]


@dataclass
class ScenarioResult:
    """What one scenario measured (``figures``) and which promises it saw broken."""

    name: str
    params: dict[str, Any]
    figures: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def check(self, condition: bool, problem: str) -> None:
        """Record ``problem`` unless ``condition`` holds."""
        if not condition:
            self.problems.append(problem)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


# -- waiting ---------------------------------------------------------------------------------


def poll_until(condition: Callable[[], Any], timeout: float, interval: float = 0.1) -> bool:
    """``wait_for`` that answers False at its deadline instead of failing the test."""
    try:
        wait_for(condition, timeout=timeout, interval=interval)
    except AssertionError:
        return False
    return True


# -- databases -------------------------------------------------------------------------------


def connect(url: str) -> Conn:
    return psycopg.connect(url, autocommit=True)


def scalar(conn: Conn, query: str, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def require_loopback(url: str) -> None:
    """Refuse a database that is not on this machine: the suite injects faults freely."""
    params = psycopg.conninfo.conninfo_to_dict(url)
    hosts = str(params.get("host") or params.get("hostaddr") or "").split(",")
    for host in hosts:
        if not host or host.startswith("/") or host == "localhost":
            continue  # a unix socket, or the default one
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise SystemExit(f"chaos: {host} is not a loopback address; refusing to run")


@contextlib.contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, migrated database on ``server_url``'s server, dropped afterwards."""
    with temporary_database(server_url, prefix="pgbeat_chaos") as url:
        with connect(url) as conn:
            apply_migrations(conn)
        yield url


class PrivateServer:
    """An embedded PostgreSQL (pgserver) of the suite's own, which a scenario stops and starts.

    It listens on a unix socket in its data directory only. As root, pgserver runs the
    server as its ``pgserver`` system user; ``pg_ctl`` is run the same way.
    """

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="pgbeat-chaos-pg-"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            self._server = pgserver.get_server(self.directory, cleanup_mode="stop")
        self.url = str(self._server.get_uri())
        self.socket_dir = parse_qs(urlsplit(self.url).query)["host"][0]
        self.running = True

    def _pg_ctl(self, args: list[str]) -> None:
        from pgserver._commands import pg_ctl

        pg_ctl(args, pgdata=self.directory, user=self._server.system_user, timeout=60)

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: clients are disconnected; ``immediate``: a crash)."""
        self._pg_ctl(["-w", "-m", mode, "stop"])
        self.running = False

    def start(self) -> None:
        """Start it again on the same data directory and socket (the URL stays valid)."""
        log = str(self.directory / "log")
        self._pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {self.socket_dir}", "-l", log, "start"])
        self.running = True

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.running:
                self.stop("immediate")
        with contextlib.suppress(Exception):
            self._server.cleanup()
        shutil.rmtree(self.directory, ignore_errors=True)


# -- processes -------------------------------------------------------------------------------


class Fleet:
    """``size`` replicas of one ``pgbeat`` command, which the suite kills and restarts."""

    def __init__(
        self, args: Sequence[str], url: str, size: int, rng: random.Random, **env: str
    ) -> None:
        self.args = list(args)
        self.url = url
        self.rng = rng
        self.env = env
        self.slots: list[CliProcess | None] = [self._start() for _ in range(size)]
        self.retired: list[CliProcess] = []  # every process that has ended, for its output
        self.kills = 0
        self.restarts = 0
        self.deaths: list[int] = []  # exit codes of processes that died without being killed
        self.last_words: list[str] = []  # the end of each such process's output

    def _start(self) -> CliProcess:
        return start_cli(self.args, self.url, cwd=str(ROOT), **self.env)

    def alive(self) -> list[CliProcess]:
        return [p for p in self.slots if p is not None and p.popen.poll() is None]

    def kill(self, count: int = 1, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` to ``count`` random live replicas and wait for them to end."""
        victims = self.rng.sample(self.alive(), min(count, len(self.alive())))
        for victim in victims:
            victim.send_signal(sig)
        for victim in victims:
            victim.wait(30)
            self.retired.append(victim)
            self.slots[self.slots.index(victim)] = None
        self.kills += len(victims)
        return len(victims)

    def restart_dead(self) -> int:
        """Start a new replica in every empty slot and in place of any that died by itself."""
        started = 0
        for index, process in enumerate(self.slots):
            if process is not None and process.popen.poll() is None:
                continue
            if process is not None:  # it died without our signal
                process.wait(10)
                self.deaths.append(process.popen.returncode)
                self.last_words.append(process.output()[-3000:])
                self.retired.append(process)
            self.slots[index] = self._start()
            self.restarts += 1
            started += 1
        return started

    def ready(self) -> bool:
        """Every live replica is running its loop (its heartbeat row is there).

        A replica registers after installing its signal handlers: a SIGTERM sent before
        that (while Python still imports) ends it the default way, with no job in hand.
        """
        pids = {p.pid for p in self.alive()}
        try:
            with connect(self.url) as conn:
                rows = conn.execute("SELECT pid FROM pgbeat_processes").fetchall()
        except psycopg.Error:
            return False
        return pids <= {row[0] for row in rows}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> list[int | None]:
        """Signal every live replica at once, wait for all; return their exit codes."""
        if sig == signal.SIGTERM:  # a loaded machine may still be importing a new replica
            poll_until(self.ready, PROCESS_START)
        live = self.alive()
        for process in live:
            process.send_signal(sig)
        codes: list[int | None] = []
        deadline = time.monotonic() + timeout
        for process in live:
            try:
                codes.append(process.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
                codes.append(None)
        for index, slot in enumerate(self.slots):
            if slot is not None:
                if slot not in live:  # it had died by itself: a death, with its last words
                    self.deaths.append(slot.popen.returncode)
                    self.last_words.append(slot.output()[-3000:])
                self.retired.append(slot)
            self.slots[index] = None
        return codes

    def outputs(self) -> list[str]:
        return [p.output() for p in self.retired] + [p.output() for p in self.slots if p]

    def tracebacks(self) -> list[str]:
        """Every output that contains a Python traceback (a crash, not a logged outcome)."""
        return [out for out in self.outputs() if "Traceback (most recent call last)" in out]


# -- audits ----------------------------------------------------------------------------------


@dataclass
class PeriodAudit:
    """One schedule's periods as found in the jobs table, against its fire times."""

    schedule: str
    periods: int
    first: datetime | None
    last: datetime | None
    duplicates: int
    missing: list[datetime]
    off_grid: list[datetime]
    bad_keys: int

    def summary(self) -> dict[str, Any]:
        return {
            "periods": self.periods,
            "first": self.first.isoformat() if self.first else None,
            "last": self.last.isoformat() if self.last else None,
            "duplicates": self.duplicates,
            "missing": len(self.missing),
            "off_grid": len(self.off_grid),
        }


def audit_periods(conn: Conn, schedule: Schedule) -> PeriodAudit:
    """Duplicates, gaps and strays among ``schedule``'s periods between its first and last.

    A period is read from its job's unique key: ``run_at`` starts as the fire time but
    moves when the job is retried or comes back through an expired lease.
    """
    rows = conn.execute(
        "SELECT unique_key, run_at, last_error IS NULL FROM jobs"
        " WHERE kind = %s AND unique_key LIKE %s AND unique_key NOT LIKE '%%@manual:%%'",
        (schedule.kind, schedule.name + "@%"),
    ).fetchall()
    fires = sorted(period_of(key) for key, _, _ in rows)
    if not fires:
        return PeriodAudit(schedule.name, 0, None, None, 0, [], [], 0)
    first, last = fires[0], fires[-1]
    expected = expected_fires(schedule, first, last)  # not pgbeat's own fire_times_between
    seen = set(fires)
    # A job never retried nor reaped still has the period's fire time as its run_at.
    bad_keys = sum(
        1
        for key, run_at, untouched in rows
        if key != expected_key(schedule, period_of(key)) or (untouched and run_at != period_of(key))
    )
    return PeriodAudit(
        schedule=schedule.name,
        periods=len(fires),
        first=first,
        last=last,
        duplicates=len(fires) - len(seen),
        missing=sorted(expected - seen),
        off_grid=sorted(seen - expected),
        bad_keys=bad_keys,
    )


def period_of(key: str) -> datetime:
    """The fire time in a period's unique key (``name@2026-03-29T01:00:00Z``)."""
    return datetime.strptime(key.rpartition("@")[2], "%Y-%m-%dT%H:%M:%S%z")


# Rows whose columns contradict their status: half-written state.
INCONSISTENT_ROWS = """
SELECT id, status, attempts, max_attempts, locked_until, finished_at, last_error FROM jobs
WHERE status NOT IN ('pending', 'running', 'done', 'failed')
   OR attempts < 0 OR attempts > max_attempts
   OR (status = 'pending' AND (locked_until IS NOT NULL OR finished_at IS NOT NULL))
   OR (status = 'running' AND (locked_until IS NULL OR attempts < 1))
   OR (status = 'done' AND (locked_until IS NOT NULL OR finished_at IS NULL OR attempts < 1))
   OR (status = 'failed' AND (locked_until IS NOT NULL OR last_error IS NULL))
ORDER BY id LIMIT 20"""


def inconsistent_rows(conn: Conn) -> list[tuple[Any, ...]]:
    return conn.execute(INCONSISTENT_ROWS).fetchall()


@dataclass
class EffectAudit:
    """Jobs run by the ``effect`` handler: lost, stuck, and how often each one ran."""

    jobs: int
    done: int
    failed: int
    pending: int
    running: int
    missing_effects: int  # done, but the handler's effect is not there
    stray_effects: int  # an effect for a job that is not done
    executions: int
    rerun_jobs: int  # jobs whose handler started more than once
    max_executions: int
    reaped: int  # jobs that came back through an expired lease

    @property
    def lost(self) -> int:
        return self.jobs - self.done

    @property
    def rerun_rate(self) -> float:
        return (self.executions - self.done) / self.jobs if self.jobs else 0.0

    def summary(self) -> dict[str, Any]:
        return {**asdict(self), "lost": self.lost, "rerun_rate": round(self.rerun_rate, 5)}


EFFECT_AUDIT = """
WITH j AS (SELECT id, status, last_error FROM jobs WHERE kind = ANY(%(kinds)s)),
     x AS (SELECT job_id, count(*) AS n FROM executions GROUP BY job_id)
SELECT
  (SELECT count(*) FROM j),
  (SELECT count(*) FROM j WHERE status = 'done'),
  (SELECT count(*) FROM j WHERE status = 'failed'),
  (SELECT count(*) FROM j WHERE status = 'pending'),
  (SELECT count(*) FROM j WHERE status = 'running'),
  (SELECT count(*) FROM j LEFT JOIN effects e ON e.job_id = j.id
     WHERE j.status = 'done' AND e.job_id IS NULL),
  (SELECT count(*) FROM effects e JOIN j ON j.id = e.job_id WHERE j.status <> 'done'),
  (SELECT coalesce(sum(n), 0) FROM x JOIN j ON j.id = x.job_id),
  (SELECT count(*) FROM x JOIN j ON j.id = x.job_id WHERE n > 1),
  (SELECT coalesce(max(n), 0) FROM x JOIN j ON j.id = x.job_id),
  (SELECT count(*) FROM j WHERE last_error LIKE 'lease expired%%')"""


def audit_effects(conn: Conn, kinds: Sequence[str]) -> EffectAudit:
    row = conn.execute(EFFECT_AUDIT, {"kinds": list(kinds)}).fetchone()
    assert row is not None
    return EffectAudit(*(int(value) for value in row))


def status_counts(conn: Conn, kinds: Sequence[str] | None = None) -> dict[str, int]:
    rows = conn.execute(
        "SELECT status, count(*) FROM jobs"
        " WHERE %(kinds)s::text[] IS NULL OR kind = ANY(%(kinds)s) GROUP BY status",
        {"kinds": list(kinds) if kinds else None},
    ).fetchall()
    return {status: count for status, count in rows}
