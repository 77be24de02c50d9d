"""The chaos scenarios, each a function of (database, parameters) -> ScenarioResult.

The pytest files run them with the SHORT parameters and assert that no promise was broken;
``python -m tests.chaos --long`` runs them with the LONG ones and prints the figures. Faults
are spaced out with sleeps drawn from a seeded generator; every wait has a deadline.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import pgbeat
from pgbeat.scheduling.file import parse_schedules
from pgbeat.scheduling.schedule import Schedule
from tests.apps.chaos_app import SETUP
from tests.chaos.harness import (
    APP,
    Conn,
    Fleet,
    PrivateServer,
    ScenarioResult,
    audit_effects,
    audit_periods,
    connect,
    fresh_database,
    inconsistent_rows,
    poll_until,
    scalar,
)
from tests.chaos.schedule_racer import (
    PAUSABLE,
    POLICY,
    ScheduleRacer,
    api_schedules,
    check_gaps,
    check_history,
)
from tests.helpers import PROCESS_START

ALL_KINDS = ("effect", "tick", "tick7", "kathmandu", "new_york", "all_tick", "none_tick")
KATHMANDU = ZoneInfo("Asia/Kathmandu")
FINISHED = "SELECT count(*) FROM jobs WHERE status IN ('done', 'failed') AND kind = ANY(%s)"
UNFINISHED = "SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')"


def enqueue_effects(conn: Conn, count: int, sleep: float, batch: int = 10_000) -> None:
    """``count`` effect jobs, inserted ``batch`` at a time."""
    for start in range(0, count, batch):
        size = min(batch, count - start)
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("effect", {"sleep": sleep})] * size)


def worker_args(concurrency: int, lease: str, timeout: str) -> list[str]:
    return [
        "worker", APP, "--concurrency", str(concurrency), "--lease", lease,
        "--timeout", timeout, "--poll", "200ms", "--log-level", "WARNING",
    ]  # fmt: skip


def check_processes(result: ScenarioResult, fleets: dict[str, Fleet], codes: list[Any]) -> None:
    """No replica died by itself or crashed with a traceback; SIGTERM stopped each with 0."""
    deaths = sum(len(fleet.deaths) for fleet in fleets.values())
    tracebacks = [out for fleet in fleets.values() for out in fleet.tracebacks()]
    result.figures["process_deaths"] = deaths
    result.figures["tracebacks"] = len(tracebacks)
    last_words = [words for fleet in fleets.values() for words in fleet.last_words]
    result.check(
        deaths == 0,
        f"{deaths} pgbeat processes died without being killed; the end of their output:\n"
        + "\n---\n".join(last_words)[:3000],
    )
    result.check(not tracebacks, "a process printed a traceback:\n" + "\n".join(tracebacks)[:3000])
    result.check(all(code == 0 for code in codes), f"exit codes after SIGTERM: {codes}")


class CrewSize(Protocol):
    """What a scenario's parameters say of its crew."""

    @property
    def schedulers(self) -> int: ...
    @property
    def workers(self) -> int: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def lease(self) -> str: ...
    @property
    def timeout(self) -> str: ...


class Crew:
    """A scenario's schedulers (on one schedules file) and workers: started together,
    stopped together, every exit code kept for ``check``."""

    def __init__(
        self,
        url: str,
        workdir: Path,
        schedules: str,
        p: CrewSize,
        rng: random.Random,
        *scheduler_flags: str,
    ) -> None:
        path = workdir / "schedules.toml"
        path.write_text(schedules)
        self.schedules = parse_schedules(schedules)
        args = ["scheduler", "--schedules", str(path), *scheduler_flags]
        self.schedulers = Fleet(args, url, p.schedulers, rng)
        self.workers = Fleet(worker_args(p.concurrency, p.lease, p.timeout), url, p.workers, rng)
        self.fleets = {"schedulers": self.schedulers, "workers": self.workers}
        self.codes: list[Any] = []

    def ready(self) -> bool:
        """Every replica of both fleets runs its loop (a process still starting exits on an
        unreachable database, by design: a fault must not come before this)."""
        return self.schedulers.ready() and self.workers.ready()

    def stop_schedulers(self) -> None:
        self.codes += self.schedulers.stop()

    def stop_workers(self) -> None:
        self.codes += self.workers.stop()

    def stop(self) -> None:
        """Stop whatever still runs (again after a stop is harmless)."""
        self.stop_schedulers()
        self.stop_workers()

    def check(self, result: ScenarioResult) -> None:
        check_processes(result, self.fleets, self.codes)


def check_effects(result: ScenarioResult, conn: Conn, kinds: tuple[str, ...]) -> None:
    """Every job done, its effect there exactly once, none stuck, no half-written row."""
    audit = audit_effects(conn, kinds)
    result.figures["effects"] = audit.summary()
    result.check(audit.lost == 0, f"{audit.lost} jobs not done: {audit.summary()}")
    result.check(audit.running == 0, f"{audit.running} jobs stuck in running")
    result.check(audit.missing_effects == 0, f"{audit.missing_effects} done jobs without effect")
    result.check(audit.stray_effects == 0, f"{audit.stray_effects} effects of jobs not done")
    bad = inconsistent_rows(conn)
    result.check(not bad, f"rows whose columns contradict their status: {bad}")


def check_periods(
    result: ScenarioResult, conn: Conn, schedules: list[Schedule], *, gaps_allowed: bool = False
) -> dict[str, Any]:
    audits = {s.name: audit_periods(conn, s) for s in schedules}
    result.figures["periods"] = {name: audit.summary() for name, audit in audits.items()}
    for name, audit in audits.items():
        result.check(audit.periods > 0, f"{name}: no period was enqueued")
        result.check(audit.duplicates == 0, f"{name}: {audit.duplicates} duplicate periods")
        result.check(not audit.off_grid, f"{name}: periods off its schedule: {audit.off_grid}")
        result.check(audit.bad_keys == 0, f"{name}: {audit.bad_keys} unique keys do not match")
        if not gaps_allowed:
            result.check(not audit.missing, f"{name}: missing periods {audit.missing[:10]}")
    return audits


# -- 1. workers under kill -9 ------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerKills:
    jobs: int = 1_500
    workers: int = 3
    concurrency: int = 4
    lease: str = "2s"
    timeout: str = "1s"
    job_sleep: float = 0.03
    kill_every: tuple[float, float] = (0.8, 2.0)
    restart_after: tuple[float, float] = (0.1, 0.8)
    fault_seconds: float = 20.0  # kill no longer than this, even with jobs left
    drain_seconds: float = 60.0
    seed: int = 1


def worker_kills(url: str, p: WorkerKills) -> ScenarioResult:
    """N effect jobs, several workers kill -9'd at random and restarted: nothing lost."""
    result = ScenarioResult("worker kills", asdict(p))
    rng = random.Random(p.seed)
    with connect(url) as conn:
        conn.execute(SETUP)
        enqueue_effects(conn, p.jobs, p.job_sleep)

        def finished() -> bool:
            return bool(scalar(conn, FINISHED, (["effect"],)) >= p.jobs)

        fleet = Fleet(worker_args(p.concurrency, p.lease, p.timeout), url, p.workers, rng)
        started = last_kill = time.monotonic()
        try:
            while time.monotonic() - started < p.fault_seconds and not finished():
                time.sleep(rng.uniform(*p.kill_every))  # spacing between faults
                # A victim that runs its loop holds jobs: on a loaded machine a replica just
                # restarted may still be importing, and its kill would strand nothing.
                poll_until(fleet.ready, PROCESS_START)
                fleet.kill(1)
                last_kill = time.monotonic()
                time.sleep(rng.uniform(*p.restart_after))
                fleet.restart_dead()
            drained = poll_until(finished, p.drain_seconds)
            ended = time.monotonic()
        finally:
            codes = fleet.stop()
        check_effects(result, conn, ("effect",))
    check_processes(result, {"workers": fleet}, codes)
    result.figures.update(
        kills=fleet.kills,
        seconds=round(ended - started, 1),
        jobs_per_second=round(p.jobs / (ended - started), 1),
        recovery_after_last_kill_s=round(ended - last_kill, 1),
    )
    result.figures.update(
        load=f"{p.jobs:,} jobs, {p.workers} workers x{p.concurrency}, "
        f"{result.figures['jobs_per_second']:,.0f} jobs/s",
        faults=f"{fleet.kills} kill -9 of workers (lease {p.lease})",
        recovery=f"all done {result.figures['recovery_after_last_kill_s']}s after the last kill",
    )
    reaped = result.figures["effects"]["reaped"]
    result.check(drained, f"jobs left after {p.drain_seconds}s without faults")
    result.check(fleet.kills > 0, "no worker was killed: the run proved nothing")
    result.check(reaped > 0, "no kill stranded a job: the run proved nothing")
    return result


# -- 2. scheduler storm --------------------------------------------------------------------------

STORM_SCHEDULES = """
[defaults]
catch_up = "all"
catch_up_window = "10m"

[schedules.tick]
every = "1s"
catch_up_window = "1m"

[schedules.tick7]
every = "7s"

[schedules.kathmandu]
cron = "*/2 * * * *"       # UTC+05:45: even local minutes are odd UTC minutes
timezone = "Asia/Kathmandu"

[schedules.new_york]
cron = "* * * * *"
timezone = "America/New_York"
"""


# The same schedules with another payload for tick7: SIGHUP reloads switch between the two.
STORM_SCHEDULES_V2 = STORM_SCHEDULES.replace(
    '[schedules.tick7]\nevery = "7s"\n', '[schedules.tick7]\nevery = "7s"\npayload = { v = 2 }\n'
)


@dataclass(frozen=True)
class SchedulerStorm:
    replicas: int = 6
    seconds: float = 9.0
    kill_every: tuple[float, float] = (0.3, 1.0)
    max_victims: int = 2
    restart_after: tuple[float, float] = (0.0, 1.0)
    total_outage_every: int = 6  # every 6th fault kills every replica at once
    race_every: tuple[float, float] = (0.1, 0.5)  # pauses, upserts, deletes, SIGHUPs...
    seed: int = 2


def scheduler_storm(url: str, p: SchedulerStorm, workdir: Path) -> ScenarioResult:
    """Replicas kill -9'd and restarted at random while schedules are paused, resumed,
    changed, deleted, run now and reloaded: every period once, none missing that was not
    paused, deleted or recorded as skipped, and a history that matches the jobs table."""
    result = ScenarioResult("scheduler storm", asdict(p))
    rng = random.Random(p.seed)
    path = workdir / "storm.toml"
    path.write_text(STORM_SCHEDULES)
    schedules = parse_schedules(STORM_SCHEDULES) + api_schedules()
    args = ["scheduler", "--schedules", str(path), "--log-level", "WARNING"]
    outages = 0
    with connect(url) as conn:

        def ticks() -> int:
            return int(scalar(conn, "SELECT count(*) FROM jobs WHERE kind = 'tick'"))

        fleet = Fleet(args, url, p.replicas, rng)
        try:
            result.check(poll_until(ticks, PROCESS_START), "no replica ever enqueued a period")
            versions = (STORM_SCHEDULES, STORM_SCHEDULES_V2)
            racer = ScheduleRacer(url, path, versions, fleet, random.Random(p.seed), p.race_every)
            racer.start()
            started = time.monotonic()
            rounds = 0
            while time.monotonic() - started < p.seconds:
                time.sleep(rng.uniform(*p.kill_every))  # spacing between faults
                rounds += 1
                total = rounds % p.total_outage_every == 0
                outages += total
                fleet.kill(p.replicas if total else rng.randint(1, p.max_victims))
                time.sleep(rng.uniform(*p.restart_after) + (rng.uniform(1, 3) if total else 0))
                fleet.restart_dead()
            racer.stop()
            before = ticks()
            result.check(
                poll_until(lambda: ticks() >= before + 2, PROCESS_START),
                "no period after the last restart",
            )
            end = scalar(conn, "SELECT now()")
        finally:
            codes = fleet.stop()
        audits = check_periods(result, conn, schedules, gaps_allowed=True)
        for schedule in schedules:
            missing = audits[schedule.name].missing
            if schedule.name in PAUSABLE or schedule.name in POLICY:
                check_gaps(result, conn, schedule, missing, racer.gaps)
            else:
                result.check(not missing, f"{schedule.name}: missing periods {missing[:10]}")
        check_history(result, conn, racer)
        kathmandu = [r[0] for r in conn.execute("SELECT run_at FROM jobs WHERE kind = 'kathmandu'")]
    check_processes(result, {"schedulers": fleet}, codes)
    last_tick = audits["tick"].last
    result.check(
        last_tick is not None and end - last_tick < timedelta(seconds=3),
        f"the last tick ({last_tick}) lags the end of the run ({end})",
    )
    odd = [t for t in kathmandu if t.astimezone(KATHMANDU).minute % 2 or t.second]
    result.check(not odd, f"Kathmandu periods off even local minutes: {odd}")
    result.figures.update(kills=fleet.kills, restarts=fleet.restarts, total_outages=outages)
    result.figures.update(
        load=f"{p.replicas} schedulers, {len(schedules)} schedules, {p.seconds:g}s",
        faults=f"{fleet.kills} kill -9 ({outages} with every replica down)",
        recovery="-",
    )
    return result


# -- 3. database restart -------------------------------------------------------------------------

RESTART_SCHEDULES = """
[schedules.all_tick]
every = "1s"
catch_up = "all"
catch_up_window = "5m"

[schedules.none_tick]
every = "1s"
catch_up = "none"
"""


@dataclass(frozen=True)
class DatabaseRestart:
    outage: float = 6.0  # seconds: longer than the 5 s a period may be late and still on time
    jobs: int = 600
    job_sleep: float = 0.05
    workers: int = 2
    concurrency: int = 4
    schedulers: int = 2
    lease: str = "3s"
    timeout: str = "2s"
    stop_mode: str = "fast"  # pg_ctl -m: fast (clean restart) or immediate (crash)
    recovery_seconds: float = 45.0
    drain_seconds: float = 60.0
    seed: int = 3


def database_restart(p: DatabaseRestart, workdir: Path) -> ScenarioResult:
    """A private PostgreSQL stopped and started under schedulers and workers."""
    server = PrivateServer()
    try:
        with fresh_database(server.url) as url:
            return _database_restart(url, server, p, workdir)
    finally:
        server.close()


class Probe:
    """Queries on a connection that is reopened whenever the server dropped it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: Conn | None = None

    def scalar(self, query: str, params: Any = None) -> Any:
        try:
            if self.conn is None or self.conn.closed or self.conn.broken:
                self.conn = connect(self.url)
            return scalar(self.conn, query, params)
        except Exception:
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def _database_restart(
    url: str, server: PrivateServer, p: DatabaseRestart, workdir: Path
) -> ScenarioResult:
    result = ScenarioResult("database restart", asdict(p))
    rng = random.Random(p.seed)
    kinds = ("effect", "all_tick", "none_tick")
    probe = Probe(url)
    with connect(url) as conn:
        conn.execute(SETUP)
        enqueue_effects(conn, p.jobs, p.job_sleep)
    crew = Crew(url, workdir, RESTART_SCHEDULES, p, rng, "--log-level", "WARNING")
    try:
        busy = lambda: (probe.scalar("SELECT count(*) FROM effects") or 0) >= p.jobs // 5  # noqa: E731
        result.check(poll_until(busy, PROCESS_START), "the workers never got going")
        result.check(poll_until(crew.ready, PROCESS_START), "not every process registered")
        down_at = probe.scalar("SELECT now()")
        running_at_stop = probe.scalar("SELECT count(*) FROM jobs WHERE status = 'running'")
        probe.close()
        server.stop(p.stop_mode)
        time.sleep(p.outage)  # the outage itself
        server.start()
        up_at = probe.scalar("SELECT now()")
        recovery = _recovery(probe, up_at, p.recovery_seconds)
        result.figures.update(
            load=f"{p.jobs:,} jobs + 2 schedules, {p.workers} workers, {p.schedulers} schedulers",
            faults=f"PostgreSQL stopped ({p.stop_mode}) for {(up_at - down_at).seconds}s",
            outage_s=round((up_at - down_at).total_seconds(), 1),
            running_at_stop=running_at_stop,
            **recovery,
        )
        effect_done = lambda: probe.scalar(FINISHED, (["effect"],)) == p.jobs  # noqa: E731
        result.check(poll_until(effect_done, p.drain_seconds), "effect jobs left unfinished")
        alive = {name: len(fleet.alive()) for name, fleet in crew.fleets.items()}
        result.check(
            alive == {"schedulers": p.schedulers, "workers": p.workers},
            f"processes alive after the restart: {alive}",
        )
        crew.stop_schedulers()
        drained = lambda: probe.scalar(UNFINISHED) == 0  # noqa: E731
        result.check(poll_until(drained, p.drain_seconds), "scheduled jobs left unfinished")
    finally:
        crew.stop()
        probe.close()
    with connect(url) as conn:
        check_effects(result, conn, kinds)
        audits = check_periods(result, conn, crew.schedules, gaps_allowed=True)
    crew.check(result)
    _check_catch_up(result, audits, down_at, up_at, recovery)
    return result


def _recovery(probe: Probe, up_at: datetime, timeout: float) -> dict[str, float | None]:
    """Seconds from the restart to the first period enqueued and the first job finished."""
    first_period = "SELECT min(created_at) FROM jobs WHERE kind = 'all_tick' AND created_at > %s"
    first_done = "SELECT min(finished_at) FROM jobs WHERE finished_at > %s"
    figures: dict[str, float | None] = {}
    for name, query in (("scheduler_recovery_s", first_period), ("worker_recovery_s", first_done)):
        poll_until(lambda q=query: probe.scalar(q, (up_at,)), timeout)  # type: ignore[misc]
        first = probe.scalar(query, (up_at,))
        figures[name] = None if first is None else round((first - up_at).total_seconds(), 2)
    return figures


def _check_catch_up(
    result: ScenarioResult,
    audits: dict[str, Any],
    down_at: datetime,
    up_at: datetime,
    recovery: dict[str, float | None],
) -> None:
    """ "all" fills the outage; "none" skips only periods inside it, none twice."""
    all_tick, none_tick = audits["all_tick"], audits["none_tick"]
    result.check(not all_tick.missing, f"catch_up=all left a gap: {all_tick.missing[:10]}")
    result.check(
        all_tick.first is not None and all_tick.first < down_at and all_tick.last > up_at,
        "all_tick does not span the outage",
    )
    reconnect = up_at + timedelta(seconds=(recovery["scheduler_recovery_s"] or 0) + 1)
    outside = [t for t in none_tick.missing if not down_at - timedelta(seconds=3) < t <= reconnect]
    result.check(not outside, f"catch_up=none skipped periods outside the outage: {outside}")
    result.check(
        recovery["scheduler_recovery_s"] is not None and recovery["worker_recovery_s"] is not None,
        f"no recovery after the restart: {recovery}",
    )
    result.figures["none_skipped"] = len(none_tick.missing)
    result.figures["recovery"] = (
        f"periods {recovery['scheduler_recovery_s']}s, jobs {recovery['worker_recovery_s']}s "
        f"after the restart; catch_up=none skipped {len(none_tick.missing)}"
    )


# -- 5. backends terminated mid-transaction ------------------------------------------------------

BACKEND_SCHEDULES = """
[defaults]
catch_up = "all"
catch_up_window = "5m"

[schedules.tick]
every = "1s"

[schedules.new_york]
cron = "* * * * *"
timezone = "America/New_York"
"""

PGBEAT_BACKENDS = """
SELECT pid, application_name FROM pg_stat_activity
WHERE datname = current_database() AND application_name LIKE 'pgbeat-%' AND pid <> pg_backend_pid()
"""


@dataclass(frozen=True)
class BackendKills:
    seconds: float = 8.0
    kill_every: tuple[float, float] = (0.05, 0.4)
    max_victims: int = 2
    workers: int = 2
    concurrency: int = 4
    schedulers: int = 2
    jobs_per_second: int = 100
    job_sleep: float = 0.01
    lease: str = "2s"
    timeout: str = "1s"
    drain_seconds: float = 75.0
    seed: int = 5


def backend_kills(url: str, p: BackendKills, workdir: Path) -> ScenarioResult:
    """pg_terminate_backend on random pgbeat-* backends: no half-written state, no repeats."""
    result = ScenarioResult("backend kills", asdict(p))
    rng = random.Random(p.seed)
    terminated: Counter[str] = Counter()
    with connect(url) as conn:
        conn.execute(SETUP)
        crew = Crew(url, workdir, BACKEND_SCHEDULES, p, rng, "--log-level", "WARNING")
        enqueued = 0
        try:
            result.check(poll_until(crew.ready, PROCESS_START), "not every process registered")
            started = time.monotonic()
            while (elapsed := time.monotonic() - started) < p.seconds:
                time.sleep(rng.uniform(*p.kill_every))  # spacing between faults
                due = int(elapsed * p.jobs_per_second) - enqueued
                enqueue_effects(conn, due, p.job_sleep)
                enqueued += due
                backends = conn.execute(PGBEAT_BACKENDS).fetchall()
                victims = rng.sample(backends, min(len(backends), rng.randint(1, p.max_victims)))
                for pid, name in victims:
                    if scalar(conn, "SELECT pg_terminate_backend(%s)", (pid,)):
                        terminated[name] += 1
            alive = len(crew.schedulers.alive()) + len(crew.workers.alive())
            result.check(alive == p.schedulers + p.workers, f"only {alive} processes survived")
            crew.stop_schedulers()
            drained = lambda: scalar(conn, UNFINISHED) == 0  # noqa: E731
            result.check(poll_until(drained, p.drain_seconds), "jobs left unfinished")
            ended = time.monotonic()
        finally:
            crew.stop()
        check_effects(result, conn, ALL_KINDS)
        check_periods(result, conn, crew.schedules)
    crew.check(result)
    result.figures.update(
        jobs_enqueued=enqueued,
        terminated=dict(terminated),
        terminated_total=sum(terminated.values()),
        recovery_after_last_kill_s=round(ended - started - p.seconds, 1),
        load=f"{enqueued:,} jobs + 2 schedules, {p.workers} workers, {p.schedulers} schedulers",
        faults=f"{sum(terminated.values())} backends terminated in {p.seconds:g}s",
    )
    result.figures["recovery"] = (
        f"all done {result.figures['recovery_after_last_kill_s']}s after the last kill"
    )
    result.check(sum(terminated.values()) > 0, "no backend was terminated: the run proved nothing")
    return result


# -- 6. poison jobs -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoisonJobs:
    ordinary: int = 400
    job_sleep: float = 0.02
    workers: int = 2
    concurrency: int = 4
    lease: str = "2s"
    timeout: str = "1s"
    max_attempts: int = 3
    exits: int = 2
    hangs: int = 1  # each of the sync and the async flavour
    huge: int = 1
    # True: poison_exit dies before any round trip of its own (runs are counted as deaths);
    # False: it first records its run in `executions`
    instant_exit: bool = False
    drain_seconds: float = 75.0
    seed: int = 6


POISON_KINDS = ("poison_exit", "poison_hang", "poison_hang_async", "poison_huge_error")
# The workers that run poison_exit run none of the others: a neighbour's os._exit would
# end a hanging or flooding run by an expired lease, and the outcome that scenario is about
# (a timeout, a truncated error) would never be seen.
KILLER_KINDS = "effect,poison_exit"
OTHER_POISON_KINDS = "effect,poison_hang,poison_hang_async,poison_huge_error"


def poison_jobs(url: str, p: PoisonJobs) -> ScenarioResult:
    """Jobs that kill, hang or flood their worker end in failed; ordinary jobs keep flowing."""
    result = ScenarioResult("poison jobs", asdict(p))
    rng = random.Random(p.seed)
    counts = {"poison_exit": p.exits, "poison_hang": p.hangs, "poison_hang_async": p.hangs}
    counts["poison_huge_error"] = p.huge
    jobs = [pgbeat.NewJob("effect", {"sleep": p.job_sleep}) for _ in range(p.ordinary)]
    jobs += [
        pgbeat.NewJob(kind, {"record": not p.instant_exit}, max_attempts=p.max_attempts)
        for kind, count in counts.items()
        for _ in range(count)
    ]
    rng.shuffle(jobs)
    with connect(url) as conn:
        conn.execute(SETUP)
        pgbeat.enqueue_many(conn, jobs)
        args = worker_args(p.concurrency, p.lease, p.timeout)
        killers = max(1, p.workers // 2)
        fleet = Fleet([*args, "--kinds", KILLER_KINDS], url, killers, rng)
        others = Fleet(
            [*args, "--kinds", OTHER_POISON_KINDS], url, max(1, p.workers - killers), rng
        )
        started = time.monotonic()
        try:
            while scalar(conn, UNFINISHED) and time.monotonic() - started < p.drain_seconds:
                time.sleep(0.2)  # the supervisor: restart workers that died
                fleet.restart_dead()
                others.restart_dead()
            ended = time.monotonic()
        finally:
            codes = fleet.stop() + others.stop()
        check_effects(result, conn, ("effect",))
        exit_runs = scalar(
            conn,
            "SELECT count(*) FROM executions JOIN jobs ON jobs.id = job_id"
            " WHERE kind = 'poison_exit'",
        )
        rows = conn.execute(
            "SELECT kind, status, attempts, length(last_error), left(last_error, 60),"
            " right(last_error, 60) FROM jobs WHERE kind LIKE 'poison%%' ORDER BY id"
        ).fetchall()
    deaths = fleet.deaths
    fleet.deaths = []  # expected here: check_processes must not count them
    check_processes(result, {"workers": fleet, "other workers": others}, codes)
    outputs = fleet.outputs() + others.outputs()
    longest = max((len(line) for out in outputs for line in out.splitlines()), default=0)
    result.figures.update(
        seconds=round(ended - started, 1),
        worker_deaths=len(deaths),
        poison_exit_runs=exit_runs,
        longest_log_line=longest,
        load=f"{p.ordinary:,} jobs + {sum(counts.values())} poison, {p.workers} workers",
        faults=f"{len(deaths)} worker deaths (os._exit), hangs, a 10 MB error",
        recovery=f"all settled in {ended - started:.1f}s",
        poison=[
            {
                "kind": kind,
                "status": status,
                "attempts": attempts,
                "error_chars": length,
                "error_head": head,
            }
            for kind, status, attempts, length, head, _ in rows
        ],
    )
    result.check(bool(deaths), "no worker died: poison_exit never ran")
    # A worker dies once however many poison_exit runs it has at that moment: deaths <= runs.
    # Every run must have been charged as an attempt, or a job that kills its worker could
    # run (and kill) forever (it could before 077942c: handlers started before the claim's
    # commit, see test_poison_jobs.py::test_a_claim_is_committed_before_its_handler_starts).
    runs = len(deaths) if p.instant_exit else exit_runs
    charged = p.exits * p.max_attempts
    result.figures["uncharged_runs"] = max(0, runs - charged)
    result.check(len(deaths) <= runs, f"{len(deaths)} worker deaths for {runs} runs")
    result.check(runs <= charged, f"{runs} runs of poison_exit for {charged} attempts charged")
    result.check(set(deaths) <= {17}, f"workers died with unexpected codes: {deaths}")
    for kind, status, attempts, length, head, tail in rows:
        result.check(status == "failed", f"{kind} ended {status}, not failed")
        result.check(attempts == p.max_attempts, f"{kind}: {attempts} attempts")
        if kind == "poison_exit":
            result.check(head.startswith("lease expired"), f"{kind}: last_error {head!r}")
        elif kind.startswith("poison_hang"):  # its timeout, nothing else, ended it
            result.check(head.startswith("TimedOut"), f"{kind}: last_error {head!r}")
        else:  # its own error, truncated to what a row should hold
            truncated = length <= 10_100 and "truncated" in tail and head.startswith("Runtime")
            result.check(truncated, f"{kind}: {length} chars, {head!r} ... {tail!r}")
    return result
