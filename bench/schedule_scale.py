"""Schedules as data at scale: many schedules from code, several scheduler replicas.

``python -m bench.schedule_scale idle``: 100,000 schedules created from code (daily crons
at random local times in 40 zones), 4 replicas running their real loop. Measures each
replica's tick when nothing is due (and when something is), in the loop and then 500
times back to back, its memory (RSS), how long it takes to load the table, and how soon
every replica runs a schedule created or changed by ``pgbeat.upsert_schedule`` after its
commit.

``python -m bench.schedule_scale startup``: 100,000 schedules created from code (as for
idle); a replica's start, three times, each in a new process (as a restart is): from
``Scheduler()`` to the end of its first tick (the table loaded, due periods claimed), and
from the launch of the process. ``--baseline DIR`` also runs the same with the pgbeat of
another checkout (``git worktree add /tmp/base REV``), in a database of its own.

``python -m bench.schedule_scale burst``: 10,000 schedules (250 in each of 40 zones) that
all fire at the same instant, 8 replicas. Measures when each period's history row and job
were inserted and when the last of them was visible, relative to the fire time, and counts
duplicates; ``--jitter 60s`` instead shows how the jobs' start times (run_at) spread.

Replicas are processes of their own (``multiprocessing``, spawn) running
``Scheduler.run``; their tick is timed from inside. Results: a table on stderr, JSON on
stdout. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psycopg

import pgbeat
from bench import database, machine
from pgbeat.db import connections
from pgbeat.durations import parse_duration
from pgbeat.scheduling.definition import schedule_values
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler

# Forty zones: whole, half and three-quarter hour offsets, both hemispheres' DST rules.
ZONES = (
    "UTC", "Europe/London", "Europe/Berlin", "Europe/Helsinki", "Europe/Moscow",
    "Europe/Lisbon", "Europe/Madrid", "Europe/Warsaw", "Africa/Cairo", "Africa/Lagos",
    "Africa/Johannesburg", "Africa/Nairobi", "Asia/Dubai", "Asia/Tehran", "Asia/Kabul",
    "Asia/Karachi", "Asia/Kolkata", "Asia/Kathmandu", "Asia/Dhaka", "Asia/Yangon",
    "Asia/Bangkok", "Asia/Shanghai", "Asia/Tokyo", "Asia/Seoul", "Australia/Adelaide",
    "Australia/Sydney", "Australia/Lord_Howe", "Pacific/Auckland", "Pacific/Chatham",
    "Pacific/Honolulu", "America/Anchorage", "America/Los_Angeles", "America/Denver",
    "America/Chicago", "America/New_York", "America/Halifax", "America/St_Johns",
    "America/Sao_Paulo", "America/Santiago", "Atlantic/Azores",
)  # fmt: skip
BACK_TO_BACK = 500  # idle ticks each replica runs one after the other at the end
COPY_SCHEDULES = (
    "COPY pgbeat_schedules (name, source, kind, cron, every, timezone, payload, max_attempts,"
    " catch_up, catch_up_window, overlap, jitter, definition_hash) FROM STDIN"
)
COLUMNS = (
    "name", "kind", "cron", "every", "timezone", "payload", "max_attempts", "catch_up",
    "catch_up_window", "overlap", "jitter", "definition_hash",
)  # fmt: skip


def log(message: str) -> None:
    print(f"[schedule_scale] {message}", file=sys.stderr, flush=True)


def insert_schedules(url: str, schedules: list[Schedule]) -> float:
    """Write ``schedules`` as created from code (COPY: 100,000 upserts would take minutes)."""
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cursor:
        with cursor.copy(COPY_SCHEDULES) as copy:
            for schedule in schedules:
                values = schedule_values(schedule)
                copy.write_row([values["name"], "api", *(values[c] for c in COLUMNS[1:])])
        cursor.execute("ANALYZE pgbeat_schedules")
    return time.perf_counter() - started


# -- a replica -------------------------------------------------------------------------------


def replica(url: str, watch: list[str], results: Any, stop: Any) -> None:
    """One scheduler replica: runs ``Scheduler.run``, times its ticks, watches names."""
    scheduler = Scheduler(url, None)
    ticks: list[tuple[float, int]] = []  # (milliseconds, groups due)
    due_counts: list[int] = []
    take_due = scheduler.catalog.take_due

    def counted(now: datetime) -> Any:
        groups = take_due(now)
        due_counts.append(len(groups))
        return groups

    scheduler.catalog.take_due = counted  # type: ignore[method-assign]
    tick = scheduler.tick

    def timed(conn: psycopg.Connection[Any], now: datetime, **options: Any) -> Any:
        started = time.perf_counter()
        result = tick(conn, now, **options)
        ticks.append(((time.perf_counter() - started) * 1000, due_counts[-1]))
        return result

    scheduler.tick = timed  # type: ignore[method-assign]
    seen: dict[str, tuple[str | None, float]] = {}

    def watcher() -> None:
        while not stop.is_set():
            for name in watch:
                member = scheduler.catalog.member(name)
                hashed = None if member is None else member.definition_hash
                if seen.get(name, (None, 0.0))[0] != hashed:
                    seen[name] = (hashed, time.time())
            time.sleep(0.002)

    loop = threading.Thread(target=scheduler.run, daemon=True)
    loop.start()
    if watch:  # a thread waking every 2 ms would take the GIL from the ticks it measures
        threading.Thread(target=watcher, daemon=True).start()
    while not ticks and not stop.is_set():
        time.sleep(0.05)
    results.put(("ready", {"load_ms": ticks[0][0] if ticks else None, "rss_mb": _rss("VmRSS")}))
    stop.wait()
    scheduler.stop()
    loop.join(timeout=30)
    in_loop = ticks[1:]
    ticks.clear()
    with psycopg.connect(url, autocommit=True, options="-c jit=off") as conn:
        for _ in range(BACK_TO_BACK):  # more samples: ticks one after the other
            scheduler.tick(conn, connections.database_now(conn))
    results.put(
        (
            "done",
            {
                "ticks": in_loop,
                "back_to_back": ticks,
                "seen": {name: value for name, value in seen.items()},
                "rss_mb": _rss("VmRSS"),
                "peak_rss_mb": _rss("VmHWM"),
                "id": scheduler.replica,
            },
        )
    )


def _rss(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class Fleet:
    """``count`` replica processes and their answers."""

    def __init__(self, url: str, count: int, watch: list[str]) -> None:
        context = mp.get_context("spawn")
        self.results = context.Queue()
        self.stop = context.Event()
        self.processes = [
            context.Process(target=replica, args=(url, watch, self.results, self.stop))
            for _ in range(count)
        ]
        for process in self.processes:
            process.start()
        self.ready = [self._next("ready") for _ in self.processes]

    def _next(self, kind: str) -> dict[str, Any]:
        """The next answer of a replica; fails when one died instead of answering."""
        while True:
            try:
                got, payload = self.results.get(timeout=5)
            except queue.Empty:
                dead = [p.exitcode for p in self.processes if not p.is_alive()]
                if dead and any(code != 0 for code in dead):
                    self.stop.set()
                    raise RuntimeError(f"a replica died (exit codes {dead})") from None
                continue
            assert got == kind, got
            result: dict[str, Any] = payload
            return result

    def finish(self) -> list[dict[str, Any]]:
        self.stop.set()
        done = [self._next("done") for _ in self.processes]
        for process in self.processes:
            process.join(timeout=30)
        return done


# -- idle: 100,000 schedules ------------------------------------------------------------------


def daily_schedules(count: int, rng: random.Random) -> list[Schedule]:
    """One daily report per customer, at a random local time, in 40 zones."""
    return [
        Schedule(
            name=f"customer_{n}",
            kind="report",
            cron=f"{rng.randrange(60)} {rng.randrange(24)} * * *",
            timezone=ZONES[n % len(ZONES)],
            payload={"customer": n},
        )
        for n in range(count)
    ]


def idle(url: str, count: int, replicas: int, seconds: float, changes: int) -> dict[str, Any]:
    rng = random.Random(13)
    schedules = daily_schedules(count, rng)
    copy_seconds = insert_schedules(url, schedules)
    log(f"{count} schedules written in {copy_seconds:.1f}s; starting {replicas} replicas")
    watch = [f"added_{n}" for n in range(changes)] + [f"customer_{n}" for n in range(changes)]
    fleet = Fleet(url, replicas, watch)
    log(f"replicas ready: {fleet.ready}; measuring {seconds:g}s")
    time.sleep(seconds / 2)
    commits = upsert_some(url, changes)
    time.sleep(seconds / 2)
    done = fleet.finish()
    return idle_figures(count, replicas, fleet.ready, done, commits, copy_seconds)


def startup(url: str, count: int, repeats: int = 3, src: str | None = None) -> dict[str, Any]:
    """A replica's start, ``repeats`` times, each in a process of its own (as a restart is):
    milliseconds from ``Scheduler()`` to the end of its first tick, and from the launch of
    the process (``src``: the pgbeat of another checkout)."""
    copy_seconds = insert_schedules(url, daily_schedules(count, random.Random(13)))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    env = machine.revision_env(src or machine.REPO_ROOT / "src")
    command = [sys.executable, "-m", "bench.schedule_scale", "start-once", "--url", url]
    millis, from_launch = [], []
    for _ in range(repeats):
        launched = time.time()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"a start-up failed: {done.stderr.strip()[-500:]}")
        child = json.loads(done.stdout)
        millis.append(child["startup_ms"])
        from_launch.append(round((child["ended"] - launched) * 1000, 1))
    log(f"start-up at {count} schedules: {millis} ms ({from_launch} ms from the launch)")
    return {
        "schedules": count,
        "copy_seconds": round(copy_seconds, 2),
        "startup_ms": millis,
        "from_launch_ms": from_launch,
    }


def start_once(url: str) -> None:
    """One replica's start in this process, timed; JSON on stdout (``startup``'s child)."""
    with psycopg.connect(url, autocommit=True, options="-c jit=off") as conn:
        started = time.perf_counter()
        scheduler = Scheduler(url, None, heartbeat=False)
        result = scheduler.tick(conn, connections.database_now(conn))
        millis = round((time.perf_counter() - started) * 1000, 1)
    ended = time.time()
    print(json.dumps({"startup_ms": millis, "ended": ended, "inserted": len(result.inserted)}))


def baseline_startup(directory: str, count: int) -> dict[str, Any]:
    """``startup`` with the pgbeat of another checkout, in a database of its own."""
    with database.fresh_database(database.admin_url(), "schedules_base") as url:
        base = Path(directory) / "src"
        migrate = [sys.executable, "-m", "pgbeat", "migrate", "--database-url", url]
        subprocess.run(migrate, env=machine.revision_env(base), check=True, capture_output=True)
        return startup(url, count, src=str(base))


def upsert_some(url: str, changes: int) -> dict[str, tuple[str, float]]:
    """Create ``changes`` schedules and change as many, one commit each, a second apart."""
    commits: dict[str, tuple[str, float]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for n in range(changes):
            changed: list[tuple[str, dict[str, Any]]] = [
                (f"added_{n}", {"every": "1h", "timezone": ZONES[n % len(ZONES)]}),
                (f"customer_{n}", {"cron": f"{n % 60} 3 * * *", "timezone": "Asia/Tokyo"}),
            ]
            for name, values in changed:
                pgbeat.upsert_schedule(conn, name, kind="report", **values)
                committed = time.time()
                hashed = conn.execute(
                    "SELECT definition_hash FROM pgbeat_schedules WHERE name = %s", (name,)
                ).fetchone()
                assert hashed is not None
                commits[name] = (hashed[0], committed)
            time.sleep(1.0)
    return commits


def idle_figures(
    count: int,
    replicas: int,
    ready: list[dict[str, Any]],
    done: list[dict[str, Any]],
    commits: dict[str, tuple[str, float]],
    copy_seconds: float,
) -> dict[str, Any]:
    per_replica = []
    visibility: list[float] = []
    for start, end in zip(ready, done, strict=True):
        idle_ms = [ms for ms, due in end["ticks"] if due == 0]
        busy_ms = [ms for ms, due in end["ticks"] if due > 0]
        again_ms = [ms for ms, due in end["back_to_back"] if due == 0]
        for name, (hashed, committed) in commits.items():
            seen_hash, seen_at = end["seen"].get(name, (None, float("inf")))
            visibility.append((seen_at - committed) * 1000 if seen_hash == hashed else 1e9)
        per_replica.append(
            {
                "load_ms": round(start["load_ms"]),
                "idle_ticks": len(idle_ms),
                "idle_tick_ms": _summary(idle_ms),
                "idle_back_to_back": len(again_ms),
                "idle_back_to_back_ms": _summary(again_ms),
                "due_ticks": len(busy_ms),
                "due_tick_ms": _summary(busy_ms),
                "rss_mb": end["rss_mb"],
                "peak_rss_mb": end["peak_rss_mb"],
            }
        )
    return {
        "benchmark": "idle",
        "schedules": count,
        "zones": len(ZONES),
        "replicas": replicas,
        "copy_seconds": round(copy_seconds, 1),
        "per_replica": per_replica,
        "upsert_visible_ms": _summary(visibility),
    }


def _summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
        "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3),
        "max": round(ordered[-1], 3),
    }


# -- burst: 10,000 schedules at one instant ----------------------------------------------------


def burst(url: str, count: int, replicas: int, jitter: str | None) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        now: datetime = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    fire = (now + timedelta(seconds=75)).replace(second=0, microsecond=0)
    schedules = [
        Schedule(
            name=f"midnight_{n}",
            kind="report",
            cron=_cron_at(fire, ZONES[n % len(ZONES)]),
            timezone=ZONES[n % len(ZONES)],
            payload={"customer": n},
            jitter=parse_duration(jitter) if jitter else None,
        )
        for n in range(count)
    ]
    insert_schedules(url, schedules)
    log(f"{count} schedules fire at {fire:%H:%M:%S}Z; starting {replicas} replicas")
    fleet = Fleet(url, replicas, [])
    log(f"replicas ready: {[r['load_ms'] for r in fleet.ready]} ms to load")
    visible_at = watch_count(url, fire, count)
    time.sleep(2)
    fleet.finish()
    return burst_figures(url, fire, count, replicas, jitter, visible_at)


def _cron_at(fire: datetime, zone: str) -> str:
    local = fire.astimezone(ZoneInfo(zone))
    return f"{local.minute} {local.hour} * * *"


def watch_count(url: str, fire: datetime, count: int) -> datetime | None:
    """The database time at which all ``count`` periods of ``fire`` were visible.

    Counted once per notification of new jobs (the jobs insert's trigger, delivered at the
    commit), and every 200 ms besides: a count of the history every 10 ms, as this bench
    did first, scanned the uncommitted rows of the tick it measured on a 2-core machine
    (about 20-50 % of a core while the tick ran).
    """
    query = (
        "SELECT count(*), clock_timestamp() FROM pgbeat_schedule_history"
        " WHERE fire_at = %s AND outcome = 'enqueued'"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("LISTEN pgbeat_jobs")
        while True:
            seen, at = conn.execute(query, (fire,)).fetchone()  # type: ignore[misc]
            if seen >= count:
                return at  # type: ignore[no-any-return]
            if at > fire + timedelta(seconds=60):
                return None
            for _ in conn.notifies(timeout=0.2, stop_after=1):
                pass


def burst_figures(
    url: str,
    fire: datetime,
    count: int,
    replicas: int,
    jitter: str | None,
    visible_at: datetime | None,
) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT extract(epoch FROM h.inserted_at - h.fire_at)::float8 * 1000,"
            "       extract(epoch FROM j.created_at - h.fire_at)::float8 * 1000,"
            "       extract(epoch FROM j.run_at - h.fire_at)::float8, h.inserted_by"
            " FROM pgbeat_schedule_history AS h JOIN jobs AS j ON j.id = h.job_id"
            " WHERE h.fire_at = %s AND h.outcome = 'enqueued'",
            (fire,),
        ).fetchall()
        jobs, keys = conn.execute(
            "SELECT count(*), count(DISTINCT (kind, unique_key)) FROM jobs"
        ).fetchone()  # type: ignore[misc]
    inserted_ms = [row[0] for row in rows]
    statement_ms = [row[1] for row in rows]
    offsets = [row[2] for row in rows]
    spread = Counter(int(offset // 10) * 10 for offset in offsets)
    return {
        "benchmark": "burst",
        "schedules": count,
        "zones": len(ZONES),
        "replicas": replicas,
        "jitter": jitter,
        "periods": len(rows),
        "jobs": jobs,
        "duplicates": jobs - keys,
        "all_visible_after_ms": None
        if visible_at is None
        else round((visible_at - fire).total_seconds() * 1000),
        "row_inserted_after_ms": _summary(inserted_ms),
        "statement_began_after_ms": _summary(statement_ms),
        "inserted_by": dict(Counter(row[3] for row in rows)),
        "run_at_offset_s": _summary(offsets),
        "run_at_histogram_10s": {f"{k}-{k + 10}s": spread[k] for k in sorted(spread)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("benchmark", choices=["idle", "burst", "startup", "start-once"])
    parser.add_argument("--url", help="start-once: the database (startup's child)")
    parser.add_argument("--baseline", metavar="DIR", help="startup: also this checkout's pgbeat")
    parser.add_argument("--schedules", type=int, help="default 100000 (idle), 10000 (burst)")
    parser.add_argument("--replicas", type=int, help="default 4 (idle), 8 (burst)")
    parser.add_argument("--seconds", type=float, default=60.0, help="idle: how long to watch")
    parser.add_argument("--changes", type=int, default=10, help="idle: upserts to watch for")
    parser.add_argument("--jitter", help="burst: a jitter such as 60s")
    args = parser.parse_args()
    if args.benchmark == "start-once":
        start_once(args.url)
        return
    admin = database.admin_url()
    with database.fresh_database(admin, "schedules") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            pgbeat.apply_migrations(conn)
        if args.benchmark == "startup":
            figures = startup(url, args.schedules or 100_000)
            if args.baseline:
                figures["baseline"] = baseline_startup(args.baseline, args.schedules or 100_000)
        elif args.benchmark == "idle":
            figures = idle(
                url, args.schedules or 100_000, args.replicas or 4, args.seconds, args.changes
            )
        else:
            figures = burst(url, args.schedules or 10_000, args.replicas or 8, args.jitter)
    figures["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
