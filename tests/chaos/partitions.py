"""Network partitions between hosts: network namespaces on this machine (tests/chaos/netns.py).

Three scenarios, each on a network of its own with a PostgreSQL on host ``db``:
- a worker host cut off for longer than the lease: its jobs are reaped and finished on
  another host, its late outcomes are fenced out by the attempt, and it carries on;
- a scheduler host cut off: the others keep every period on time, none twice on return;
- the database host cut off from everyone: every process reconnects, no job is lost, and
  each schedule catches up by its policy.
Every cut drops packets silently (iptables), as a failed switch would.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pgbeat
from pgbeat.scheduling.file import parse_schedules
from tests.apps.partition_app import SETUP
from tests.chaos.harness import (
    ScenarioResult,
    audit_periods,
    connect,
    fresh_database,
    inconsistent_rows,
    poll_until,
    scalar,
)
from tests.chaos.netns import Host, Network, NetworkPostgres, start_on
from tests.helpers import CliProcess

APP = "tests.apps.partition_app:registry"
NOT_DONE = "SELECT count(*) FROM jobs WHERE kind = 'work' AND status <> 'done'"


@dataclass
class Site:
    """A network, its database host, and a migrated database on it."""

    network: Network
    postgres: NetworkPostgres
    local_url: str  # the suite's view: the unix socket, which no cut affects
    host_url: str  # the hosts' view: through the bridge

    def start(self, host: Host, args: list[str]) -> CliProcess:
        return start_on(host, [*args, "--log-level", "WARNING"], self.host_url)

    def now(self) -> datetime:
        with connect(self.local_url) as conn:
            return scalar(conn, "SELECT now()")  # type: ignore[no-any-return]


@contextlib.contextmanager
def site(*hosts: str) -> Iterator[Site]:
    """A network with ``db`` and ``hosts``, a PostgreSQL on ``db``, a fresh database."""
    network = Network()
    postgres: NetworkPostgres | None = None
    try:
        db = network.add_host("db")
        for name in hosts:
            network.add_host(name)
        postgres = NetworkPostgres(db)
        with fresh_database(postgres.local_url()) as local_url:
            with connect(local_url) as conn:
                conn.execute(SETUP)
            name = urlsplit(local_url).path.lstrip("/")
            yield Site(network, postgres, local_url, postgres.url(name))
    finally:
        if postgres is not None:
            postgres.close()
        network.close()


def worker_args(lease: float, timeout: float, concurrency: int) -> list[str]:
    return [
        "worker", APP, "--concurrency", str(concurrency), "--lease", f"{round(lease * 1000)}ms",
        "--timeout", f"{round(timeout * 1000)}ms", "--poll", "200ms",
    ]  # fmt: skip


def stop_all(processes: list[CliProcess]) -> list[int | None]:
    """SIGTERM to each, then wait for each: their exit codes (None: had to be killed)."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    codes: list[int | None] = []
    for process in processes:
        try:
            codes.append(process.wait(40))
        except Exception:
            process.kill()
            codes.append(None)
    return codes


def check_exits(result: ScenarioResult, processes: dict[str, CliProcess], codes: list[Any]) -> None:
    crashed = {n: p.output()[-2000:] for n, p in processes.items() if "Traceback" in p.output()}
    result.check(not crashed, f"tracebacks: {crashed}")
    failed = {n: p.output()[-500:] for n, p in processes.items() if p.returncode != 0}
    result.check(all(code == 0 for code in codes), f"exit codes after SIGTERM: {failed}")


def seconds_between(start: datetime, end: datetime | None) -> float | None:
    return None if end is None else round((end - start).total_seconds(), 1)


# -- 1. a worker host cut off for longer than the lease -------------------------------------------


@dataclass(frozen=True)
class WorkerCut:
    lease: float = 3.0
    timeout: float = 2.0
    job_seconds: float = 1.5  # the cut comes while the cut-off worker runs its jobs
    cut: float = 8.0  # longer than the lease
    concurrency: int = 4
    later_jobs: int = 40  # enqueued once the link is back: the cut-off worker must run them


def worker_cut(p: WorkerCut) -> ScenarioResult:
    result = ScenarioResult("partition: worker host", asdict(p))
    with site("w1", "w2") as s:
        hosts = s.network.hosts
        w1 = s.start(hosts["w1"], worker_args(p.lease, p.timeout, p.concurrency))
        processes = {"w1": w1}
        try:
            _worker_cut(result, s, p, processes)
        finally:
            codes = stop_all(list(processes.values()))
        check_exits(result, processes, codes)
        result.check("could not record" not in w1.output(), "w1 gave up on its outcomes")
        with connect(s.local_url) as conn:
            _audit_worker_cut(result, conn, p)
    return result


def _worker_cut(
    result: ScenarioResult, s: Site, p: WorkerCut, processes: dict[str, CliProcess]
) -> None:
    hosts, w1 = s.network.hosts, processes["w1"]
    with connect(s.local_url) as conn:
        work = {"seconds": p.job_seconds, "fail_on": "w1"}
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("work", work)] * p.concurrency)

        def running() -> int:
            return int(scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'running'"))

        result.check(poll_until(lambda: running() == p.concurrency, 30), "w1 never claimed")
        s.network.cut("w1")
        cut_at = scalar(conn, "SELECT now()")
        processes["w2"] = w2 = s.start(hosts["w2"], worker_args(p.lease, p.timeout, p.concurrency))
        finished = poll_until(lambda: scalar(conn, NOT_DONE) == 0, p.cut - 0.5)
        done_at = scalar(conn, "SELECT now()")
        result.check(finished, "w1's jobs were not finished elsewhere during the cut")
        time.sleep(max(0.0, p.cut - (done_at - cut_at).total_seconds()))
        stop_all([w2])  # from now on only w1 can run jobs: it must carry on by itself
        s.network.restore("w1")
        restored_at = scalar(conn, "SELECT now()")
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("work", {"seconds": 0.01})] * p.later_jobs)
        result.check(poll_until(lambda: scalar(conn, NOT_DONE) == 0, 90), "w1 did not carry on")
        first_run = scalar(conn, "SELECT min(at) FROM runs WHERE host = 'w1'")
        result.check(w1.popen.poll() is None, "w1 exited")
        result.figures.update(
            load=f"{p.concurrency} jobs of {p.job_seconds}s on w1, then {p.later_jobs} more",
            faults=f"w1 cut off {p.cut:g}s, lease {p.lease:g}s",
            finished_elsewhere_s=seconds_between(cut_at, done_at),
            recovery_s=seconds_between(restored_at, first_run),
            recovery=f"w1 ran jobs again {seconds_between(restored_at, first_run)}s after the "
            "link returned, same process",
        )


def _audit_worker_cut(result: ScenarioResult, conn: Any, p: WorkerCut) -> None:
    rows = conn.execute(
        "SELECT j.id, j.status, j.attempts, coalesce(j.last_error, ''),"
        " array(SELECT host || ':' || attempt FROM runs r WHERE r.job_id = j.id)"
        " FROM jobs j WHERE j.payload ? 'fail_on' ORDER BY j.id"
    ).fetchall()
    overwritten = [r for r in rows if r[1] != "done" or "late failure" in r[3]]
    elsewhere = [r for r in rows if r[4] == [f"w2:{r[2]}"] and r[2] >= 2]
    lost = scalar(conn, NOT_DONE)
    by_w1 = scalar(conn, "SELECT count(*) FROM runs WHERE host = 'w1'")
    late = scalar(
        conn,
        "SELECT count(*) FROM pgbeat_job_attempts"
        " WHERE attempt = 1 AND position('late failure from w1' IN error) > 0",
    )
    result.figures.update(
        effects={"lost": lost, "running": 0, "rerun_rate": 0.0, "rerun_jobs": 0},
        overwritten=len(overwritten),
        reaped_and_finished_on_w2=len(elsewhere),
        later_jobs_run_by_w1=by_w1,
        late_outcomes_recorded_as_history=late,
    )
    result.check(lost == 0, f"{lost} jobs not done")
    result.check(not overwritten, f"a late outcome overwrote a newer attempt: {overwritten}")
    result.check(len(elsewhere) == p.concurrency, f"not reaped and finished on w2: {rows}")
    result.check(by_w1 == p.later_jobs, f"w1 ran {by_w1} of the {p.later_jobs} later jobs")
    # the late outcomes did reach the database (as history), and changed no job
    result.check(late == p.concurrency, f"{late} of w1's late outcomes were written")
    result.check(not inconsistent_rows(conn), f"inconsistent rows: {inconsistent_rows(conn)}")


# -- 2. a scheduler host cut off ------------------------------------------------------------------

SCHEDULES = """
[defaults]
catch_up = "all"
catch_up_window = "10m"

[schedules.tick]
every = "1s"
"""


@dataclass(frozen=True)
class SchedulerCut:
    replicas: int = 3
    before: float = 3.0
    cut: float = 10.0
    after: float = 5.0


def scheduler_cut(p: SchedulerCut, workdir: Any) -> ScenarioResult:
    result = ScenarioResult("partition: scheduler host", asdict(p))
    path = workdir / "partition-schedules.toml"
    path.write_text(SCHEDULES)
    (schedule,) = parse_schedules(SCHEDULES)
    names = [f"s{i + 1}" for i in range(p.replicas)]
    with site(*names) as s:
        args = ["scheduler", "--schedules", str(path)]
        processes = {name: s.start(s.network.hosts[name], args) for name in names}
        try:
            time.sleep(p.before)
            s.network.cut("s1")
            cut_at = s.now()
            time.sleep(p.cut)
            s.network.restore("s1")
            restored_at = s.now()
            time.sleep(p.after)
            with connect(s.local_url) as conn:
                beat = scalar(
                    conn,
                    "SELECT max(heartbeat_at) FROM pgbeat_processes WHERE pid = %s",
                    (processes["s1"].pid,),
                )
                lag = scalar(
                    conn,
                    "SELECT extract(epoch FROM max(created_at - run_at)) FROM jobs"
                    " WHERE run_at BETWEEN %s AND %s",
                    (cut_at, restored_at),
                )
        finally:
            codes = stop_all(list(processes.values()))
        check_exits(result, processes, codes)
        with connect(s.local_url) as conn:
            audit = audit_periods(conn, schedule)
    recovery = seconds_between(restored_at, beat)
    result.figures.update(
        load=f"{p.replicas} schedulers, a 1 s schedule",
        faults=f"s1 cut off {p.cut:g}s",
        periods={"tick": audit.summary()},
        max_lag_during_cut_s=round(float(lag or 0.0), 2),
        recovery_s=recovery,
        recovery=f"s1 beat again {recovery}s after the link returned; periods at most "
        f"{round(float(lag or 0.0), 2)}s late during the cut",
    )
    result.check(audit.duplicates == 0, f"duplicates: {audit.summary()}")
    result.check(not audit.missing, f"missing periods: {audit.missing[:10]}")
    result.check(lag is not None and lag < 5, f"periods during the cut up to {lag}s late")
    result.check(recovery is not None and recovery > 0, f"s1 never beat again: {beat}")
    return result


# -- 3. the database host cut off from everyone ----------------------------------------------------

DB_SCHEDULES = """
[schedules.all_tick]
every = "1s"
catch_up = "all"
catch_up_window = "10m"

[schedules.latest_tick]
every = "1s"
catch_up = "latest"
"""

FRESH_BEATS = "SELECT count(*) FROM pgbeat_processes WHERE heartbeat_at > %s"


@dataclass(frozen=True)
class DatabaseCut:
    cut: float = 30.0
    workers: int = 2
    schedulers: int = 2
    jobs_per_second: int = 50
    recovery_seconds: float = 90.0


def database_cut(p: DatabaseCut, workdir: Any) -> ScenarioResult:
    result = ScenarioResult("partition: database host", asdict(p))
    path = workdir / "partition-db-schedules.toml"
    path.write_text(DB_SCHEDULES)
    schedules = {s.name: s for s in parse_schedules(DB_SCHEDULES)}
    workers = [f"w{i + 1}" for i in range(p.workers)]
    schedulers = [f"s{i + 1}" for i in range(p.schedulers)]
    with site(*workers, *schedulers) as s:
        hosts = s.network.hosts
        processes = {name: s.start(hosts[name], worker_args(5, 4, 4)) for name in workers}
        for name in schedulers:
            processes[name] = s.start(hosts[name], ["scheduler", "--schedules", str(path)])
        try:
            times = _database_cut(result, s, p, len(processes))
        finally:
            codes = stop_all(list(processes.values()))
        check_exits(result, processes, codes)
        with connect(s.local_url) as conn:
            lost = scalar(conn, NOT_DONE)
            audits = {name: audit_periods(conn, schedule) for name, schedule in schedules.items()}
            bad = inconsistent_rows(conn)
    cut_at, restored_at, reconnected_at = times
    skipped = audits["latest_tick"].missing
    window_end = (reconnected_at or restored_at) + timedelta(seconds=2)
    outside = [t for t in skipped if not cut_at - timedelta(seconds=2) < t <= window_end]
    result.figures.update(
        periods={name: audit.summary() for name, audit in audits.items()},
        effects={"lost": lost, "running": 0, "rerun_rate": 0.0, "rerun_jobs": 0},
        latest_skipped=len(skipped),
    )
    result.figures["recovery"] = f"{result.figures.get('recovery')}; catch_up=latest skipped "
    result.figures["recovery"] += f"{len(skipped)} periods of the cut"
    result.check(lost == 0, f"{lost} jobs not done")
    result.check(not bad, f"inconsistent rows: {bad}")
    result.check(all(a.duplicates == 0 for a in audits.values()), "duplicate periods")
    result.check(not audits["all_tick"].missing, f"all_tick gaps: {audits['all_tick'].missing}")
    result.check(not outside, f"catch_up=latest skipped periods outside the cut: {outside}")
    return result


def _database_cut(
    result: ScenarioResult, s: Site, p: DatabaseCut, count: int
) -> tuple[datetime, datetime, datetime | None]:
    with connect(s.local_url) as conn:

        def fresh(since: datetime) -> bool:
            return bool(scalar(conn, FRESH_BEATS, (since,)) == count)

        started = scalar(conn, "SELECT now()")
        result.check(poll_until(lambda: fresh(started), 30), "not every process started")
        load = _steady_load(conn, p.jobs_per_second, 3.0)
        s.network.cut("db")
        cut_at = scalar(conn, "SELECT now()")
        load += _steady_load(conn, p.jobs_per_second, p.cut)  # the suite still reaches it
        s.network.restore("db")
        restored_at = scalar(conn, "SELECT now()")
        poll_until(lambda: fresh(restored_at), p.recovery_seconds)
        beats = scalar(conn, "SELECT min(heartbeat_at) FROM pgbeat_processes")
        reconnected_at = beats if fresh(restored_at) else None
        drained = poll_until(lambda: scalar(conn, NOT_DONE) == 0, p.recovery_seconds)
        drained_at = scalar(conn, "SELECT now()")
        first_period = scalar(
            conn, "SELECT min(created_at) FROM jobs WHERE kind = 'all_tick' AND created_at > %s",
            (restored_at,),
        )  # fmt: skip
        stale = scalar(
            conn,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'pgbeat-%%'"
            " AND backend_start < %s",
            (restored_at,),
        )
    result.check(reconnected_at is not None, "not every process reconnected")
    result.check(drained, "the backlog was not drained")
    reconnect_s = seconds_between(restored_at, reconnected_at)
    result.figures.update(
        load=f"{load} jobs ({p.jobs_per_second}/s), {p.workers} workers, {p.schedulers} schedulers",
        faults=f"db cut off from every host {p.cut:g}s",
        all_reconnected_s=reconnect_s,
        first_period_s=seconds_between(restored_at, first_period),
        drained_s=seconds_between(restored_at, drained_at),
        server_backends_left_from_before=stale,
        recovery=f"every process beat again {reconnect_s}s after the link returned, backlog "
        f"drained in {seconds_between(restored_at, drained_at)}s",
    )
    return cut_at, restored_at, reconnected_at


def _steady_load(conn: Any, per_second: int, seconds: float) -> int:
    """Enqueue ``per_second`` short jobs a second for ``seconds``; return how many."""
    enqueued = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = max(1, per_second // 10)
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("work", {"seconds": 0.01})] * batch)
        enqueued += batch
        time.sleep(0.1)
    return enqueued
