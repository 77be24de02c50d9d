"""Scenario: kill -9 of the primary under load, and promotion of its standby.

Workers and schedulers run on a multi-host URL with ``target_session_attrs=read-write``
(tests/chaos/clusters.py), an application thread enqueues jobs and notes each acknowledged
one, and after the promotion the new primary is audited: acknowledged jobs lost, duplicate
and missing periods (``catch_up = "all"``), periods a scheduler logged as enqueued but
absent, how long each process took to work on the new primary, and what became of the jobs
that were running at the kill.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

import pgbeat
from pgbeat.db.migrate import apply_migrations
from pgbeat.scheduling.scheduler import Scheduler
from tests.apps.chaos_app import SETUP
from tests.chaos.clusters import ReplicatedPair
from tests.chaos.harness import (
    Fleet,
    ScenarioResult,
    audit_effects,
    audit_periods,
    connect,
    inconsistent_rows,
    poll_until,
    scalar,
)
from tests.chaos.scenarios import Crew

FAILOVER_SCHEDULES = """
[schedules.all_tick]
every = "1s"
kind = "all_tick"
catch_up = "all"
catch_up_window = "30s"
"""


@dataclass(frozen=True)
class Failover:
    synchronous: bool = True
    load_seconds: float = 2.0  # of load before the kill
    no_primary: float = 1.0  # seconds without a primary: failure detection, as Patroni's
    after_seconds: float = 3.0  # of load on the new primary
    enqueue_rate: float = 40.0  # the application's jobs per second
    job_sleep: float = 0.05
    workers: int = 2
    concurrency: int = 4
    schedulers: int = 2
    lease: str = "3s"
    timeout: str = "2s"
    recovery_seconds: float = 30.0
    drain_seconds: float = 60.0
    quiet_kill: bool = True  # kill in a quiet moment (no enqueues), else under full load
    tick_rounds: int = 0  # ticks timed per synchronous_commit setting (0: none)
    seed: int = 25


@dataclass
class Application:
    """Enqueues ``effect`` jobs at a rate, reconnecting as needed; notes each acknowledged one."""

    url: str
    rate: float
    sleep: float
    acknowledged: list[tuple[int, float]] = field(default_factory=list)  # (seq, time.time())
    failures: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _hold: threading.Event = field(default_factory=threading.Event)  # asked to pause
    held: threading.Event = field(default_factory=threading.Event)  # paused between enqueues

    def pause(self) -> None:
        """Stop enqueuing until ``resume`` (a quiet moment on the primary)."""
        self._hold.set()

    def resume(self) -> None:
        self._hold.clear()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        seq = 0
        while not self._stop.is_set():
            if self._hold.is_set():
                self.held.set()
                self._stop.wait(0.01)
                continue
            self.held.clear()
            try:
                if conn is None or conn.closed or conn.broken:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                pgbeat.enqueue(conn, "effect", {"seq": seq, "sleep": self.sleep})
                self.acknowledged.append((seq, time.time()))
                seq += 1
            except psycopg.Error:
                self.failures += 1
                if conn is not None:
                    conn.close()
                conn = None
            self._stop.wait(1.0 / self.rate)  # pacing of the load, not a synchronisation
        if conn is not None:
            conn.close()


def failover(p: Failover, workdir: Path) -> ScenarioResult:
    """Two clusters, a fleet on both hosts, kill -9 of the primary, promotion, audits."""
    pair = ReplicatedPair(synchronous=p.synchronous)
    try:
        return _failover(pair, p, workdir)
    finally:
        pair.close()


def _failover(pair: ReplicatedPair, p: Failover, workdir: Path) -> ScenarioResult:
    mode = "synchronous" if p.synchronous else "asynchronous"
    result = ScenarioResult(f"primary failover ({mode})", asdict(p))
    rng = random.Random(p.seed)
    with connect(pair.primary.url()) as admin:
        admin.execute("CREATE DATABASE pgbeat")
    direct = pair.primary.url("pgbeat")
    with connect(direct) as conn:
        apply_migrations(conn)
        conn.execute(SETUP)
    if p.tick_rounds:
        result.figures["tick_ms"] = tick_cost(direct, p.tick_rounds)
    url = pair.url("pgbeat")
    app = Application(url, p.enqueue_rate, p.job_sleep)
    # DEBUG: the audit reads each enqueued period's own line
    crew = Crew(
        url, workdir, FAILOVER_SCHEDULES, p, rng, "--log-format", "json", "--log-level", "DEBUG"
    )
    schedulers, (schedule,) = crew.schedulers, crew.schedules
    thread = app.start()
    try:
        with connect(direct) as conn:
            going = lambda: scalar(conn, "SELECT count(*) FROM effects") > 0  # noqa: E731
            result.check(poll_until(going, 30), "the workers never got going")
            result.check(poll_until(schedulers.ready, 30), "the schedulers never registered")
            time.sleep(p.load_seconds)  # the load before the fault
            running = [r[0] for r in conn.execute("SELECT id FROM jobs WHERE status = 'running'")]
        # The worst moment: a quiet primary (no commit of the application's flushes the WAL
        # for the others), just after a scheduler logged a period as enqueued.
        if p.quiet_kill:
            app.pause()
            result.check(poll_until(app.held.is_set, 10, interval=0.01), "the application ran on")
        logged = _enqueued_lines(schedulers)
        killed_at = pair.fail_over(lambda: _enqueued_lines(schedulers) > logged)
        app.resume()
        time.sleep(p.no_primary)  # the fault itself: no primary until the standby is promoted
        promoted_at = pair.promote()
        recovery = _recovery(
            pair.standby.url("pgbeat"), crew.fleets, killed_at, promoted_at, p.recovery_seconds
        )
        result.check(
            recovery["all_working_s"] is not None, f"not every process came back: {recovery}"
        )
        time.sleep(p.after_seconds)  # load on the new primary
        app.stop()
        thread.join(10)
        new = pair.standby.url("pgbeat")
        with connect(new) as conn:
            acked = [seq for seq, _ in app.acknowledged]
            done = lambda: _done_seqs(conn) >= len(set(acked) & _present_seqs(conn))  # noqa: E731
            result.check(poll_until(done, p.drain_seconds), "effect jobs left unfinished")
            crew.stop_schedulers()
            idle = lambda: scalar(conn, UNFINISHED) == 0  # noqa: E731
            left = poll_until(idle, p.drain_seconds)
            result.check(left, "jobs left unfinished on the new primary")
            crew.stop_workers()
            _audit(result, conn, app, schedule, schedulers, running, killed_at)
        result.figures.update(
            load=f"{p.enqueue_rate:g} jobs/s + a 1 s schedule, {p.workers} workers, "
            f"{p.schedulers} schedulers",
            faults=f"kill -9 of the primary, {p.no_primary:g} s without one, standby promoted",
            replication=mode,
            **recovery,
        )
    finally:
        app.stop()
        crew.stop()
    crew.check(result)
    result.figures["recovery"] = (
        f"every process on the new primary {recovery['all_working_s']} s after the promotion"
    )
    return result


UNFINISHED = "SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')"


def _present_seqs(conn: psycopg.Connection[Any]) -> set[int]:
    rows = conn.execute("SELECT (payload->>'seq')::int FROM jobs WHERE kind = 'effect'")
    return {row[0] for row in rows}


def _done_seqs(conn: psycopg.Connection[Any]) -> int:
    return int(scalar(conn, "SELECT count(*) FROM jobs WHERE kind = 'effect' AND status = 'done'"))


def _recovery(
    url: str, fleets: dict[str, Fleet], killed_at: float, promoted_at: float, timeout: float
) -> dict[str, Any]:
    """Seconds from the promotion until each process worked on the new primary (0 when it
    got there while ``promote`` still waited to see the promotion).

    A worker: its first execution there. A scheduler: its first tick there (its log line
    "reconnected: looking back ...", with the time of its JSON log).
    """
    workers = {p.pid: p for p in fleets["workers"].alive()}
    schedulers = fleets["schedulers"].alive()
    first: dict[str, float | None] = {}

    def measured() -> bool:
        with connect(url) as conn:
            for pid in workers:
                if first.get(f"worker {pid}") is None:
                    at = scalar(
                        conn,
                        "SELECT extract(epoch FROM min(at))::float8 FROM executions"
                        " WHERE pid = %s AND at > to_timestamp(%s)",
                        (pid, killed_at),
                    )
                    first[f"worker {pid}"] = None if at is None else max(at - promoted_at, 0)
        for process in schedulers:
            at = _reconnected_at(process.output(), killed_at)
            first[f"scheduler {process.pid}"] = None if at is None else max(at - promoted_at, 0)
        return all(value is not None for value in first.values())

    poll_until(measured, timeout, interval=0.2)
    seconds = [value for value in first.values() if value is not None]
    return {
        "working_s": {name: None if v is None else round(v, 2) for name, v in first.items()},
        "all_working_s": round(max(seconds), 2) if len(seconds) == len(first) else None,
    }


def _reconnected_at(output: str, after: float) -> float | None:
    for line in output.splitlines():
        if "reconnected: looking back" not in line:
            continue
        with_time = _json_line(line)
        if with_time is None:
            continue
        at = datetime.fromisoformat(with_time["time"]).timestamp()
        if at >= after:
            return at
    return None


def _json_line(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "time" in value else None


def _enqueued_lines(fleet: Fleet) -> int:
    """How many "enqueued" lines the fleet's processes have logged so far (cheaply)."""
    return sum(p.output().count('"message": "enqueued ') for p in fleet.alive())


def _logged_enqueued(outputs: list[str]) -> set[str]:
    """The period keys the schedulers logged as enqueued ("enqueued all_tick@...")."""
    keys = set()
    for output in outputs:
        for line in output.splitlines():
            record = _json_line(line)
            message = "" if record is None else str(record.get("message", ""))
            if message.startswith("enqueued "):
                keys.add(message.removeprefix("enqueued "))
    return keys


def _audit(
    result: ScenarioResult,
    conn: psycopg.Connection[Any],
    app: Application,
    schedule: Any,
    schedulers: Fleet,
    running: list[int],
    killed_at: float,
) -> None:
    present = _present_seqs(conn)
    before = [(seq, at) for seq, at in app.acknowledged if at <= killed_at]
    lost = [(seq, at) for seq, at in before if seq not in present]
    later_lost = [seq for seq, at in app.acknowledged if at > killed_at and seq not in present]
    result.figures["acknowledged_before_kill"] = len(before)
    result.figures["lost_acknowledged"] = len(lost)
    result.figures["lost_window_ms"] = (
        round((killed_at - min(at for _, at in lost)) * 1000) if lost else 0
    )
    result.figures["enqueue_failures"] = app.failures
    result.check(not later_lost, f"jobs acknowledged after the kill are missing: {later_lost[:10]}")
    if result.params["synchronous"]:
        result.check(not lost, f"{len(lost)} acknowledged jobs lost with synchronous replication")
    effects = audit_effects(conn, ["effect", "all_tick"]).summary()
    result.figures["effects"] = {**effects, "lost": len(lost)}  # lost: acknowledged, gone
    statuses = dict(conn.execute("SELECT status, count(*) FROM jobs GROUP BY status").fetchall())
    result.figures["statuses"] = statuses
    result.check(set(statuses) <= {"done"}, f"jobs not done: {statuses}")
    bad = inconsistent_rows(conn)
    result.check(not bad, f"rows whose columns contradict their status: {bad}")
    # The jobs running at the kill (those the new primary knows): done, having run there.
    survived = [job for job in running if scalar(conn, "SELECT 1 FROM jobs WHERE id = %s", (job,))]
    reran = scalar(
        conn,
        "SELECT count(DISTINCT j.id) FROM jobs AS j JOIN executions AS x ON x.job_id = j.id"
        " WHERE j.id = ANY(%s) AND j.status = 'done'",
        (survived,),
    )
    result.figures["running_at_kill"] = len(running)
    result.figures["running_at_kill_on_new_primary"] = len(survived)
    result.figures["running_at_kill_done"] = reran
    result.check(reran == len(survived), f"jobs running at the kill not done: {survived}")
    if result.params["synchronous"]:
        result.check(len(survived) == len(running), "jobs running at the kill are gone")
    audit = audit_periods(conn, schedule)
    result.figures["periods"] = {"all_tick": audit.summary()}
    result.check(audit.duplicates == 0, f"{audit.duplicates} duplicate periods")
    result.check(not audit.missing, f"missing periods (catch_up=all): {audit.missing[:10]}")
    result.check(not audit.off_grid, f"periods off the schedule: {audit.off_grid[:10]}")
    logged = _logged_enqueued(schedulers.outputs())
    keys = {row[0] for row in conn.execute("SELECT unique_key FROM jobs WHERE kind = 'all_tick'")}
    absent = sorted(logged - keys)
    result.figures["logged_enqueued"] = len(logged)
    result.figures["logged_enqueued_absent"] = len(absent)
    result.check(not absent, f"periods logged as enqueued, absent on the new primary: {absent}")
    gaps = scalar(
        conn,
        "SELECT count(*) FROM (SELECT fire_at - lag(fire_at) OVER (ORDER BY fire_at) AS step"
        " FROM pgbeat_schedule_history WHERE schedule = 'all_tick' AND outcome <> 'manual') s"
        " WHERE step > interval '1 second'",
    )
    result.figures["history_gaps"] = gaps
    result.check(gaps == 0, f"the history of all_tick has {gaps} gaps")


SYNC_ON = "SET synchronous_commit = on"
SYNC_OFF = "SET synchronous_commit = off"


def tick_cost(url: str, rounds: int, schedules: int = 20) -> dict[str, Any]:
    """Median milliseconds of a scheduler tick that claims ``schedules`` new periods, with the
    claim committed under ``synchronous_commit`` off and on, interleaved round by round."""
    with connect(url) as conn:
        for n in range(schedules):
            pgbeat.upsert_schedule(conn, f"cost_{n}", every="1s", kind="cost", catch_up="none")
        scheduler = Scheduler(url, None, heartbeat=False)
        now = scalar(conn, "SELECT date_trunc('second', now())")
        scheduler.tick(conn, now)
        timings: dict[str, list[float]] = {"off": [], "on": []}
        for round_ in range(rounds):
            for setting in ("off", "on"):
                conn.execute(SYNC_ON if setting == "on" else SYNC_OFF)
                now += timedelta(seconds=1)
                started = time.perf_counter()
                inserted = scheduler.tick(conn, now, refresh=False).inserted
                timings[setting].append((time.perf_counter() - started) * 1000)
                assert len(inserted) == schedules, (round_, len(inserted))
        conn.execute("DELETE FROM jobs WHERE kind = 'cost'")
        conn.execute("DELETE FROM pgbeat_schedules WHERE kind = 'cost'")
        conn.execute("DELETE FROM pgbeat_schedule_history WHERE schedule LIKE 'cost\\_%%'")
    return {
        f"synchronous_commit_{setting}": round(statistics.median(values), 2)
        for setting, values in timings.items()
    } | {"schedules": schedules, "rounds": rounds, "at": datetime.now(UTC).isoformat()}
