"""pgbeat's scheduler: how long one ``Scheduler.tick`` takes for 1,000 and 10,000 schedules.

Five ticks per size, all at a pinned database time: ``new`` (a cold start: a replica's
first tick, which syncs its file, loads the table and inserts every period),
``existing`` (a second replica's first tick: every period already there, all conflicts),
``idle`` (the first replica again a second later: nothing due, as the loop ticks when no
NOTIFY came: no look at the table), ``look`` (the same with the look at the table for
changes that the loop takes after a NOTIFY and at least every 5 s), ``minute`` (the first
replica a minute later, after ANALYZE: every period new, with statistics that know the
history; the tick whose plan once went quadratic) and ``restart`` (a new replica two
minutes later: loads the table and inserts that minute's periods). The connection runs
without JIT, as the scheduler's own does. ``--baseline DIR`` first measures the pgbeat of
another checkout (e.g. ``git worktree add /tmp/base REV``) in a database of its own, with
this same code, and prints both side by side with their ratios (a loaded machine moves
both alike).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

import pgbeat
from bench import database, machine
from bench.measure import (
    TICK,
    Result,
    Stopwatch,
    emit,
    log,
    parse_system_arguments,
    system_arguments,
)
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler

SYSTEM = "pgbeat"
REPEATS = 3


def build_schedules(count: int) -> list[Schedule]:
    """``count`` distinct ``every = "1m"`` schedules of one kind."""
    every = timedelta(minutes=1)
    return [Schedule(name=f"heartbeat_{i}", kind="heartbeat", every=every) for i in range(count)]


def pinned_now(conn: psycopg.Connection[Any]) -> datetime:
    """The database's time, moved to 20 s past a minute so no period is on the edge."""
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now.replace(second=20, microsecond=0)


def tick_times(url: str, count: int) -> list[Result]:
    """Median milliseconds of the three kinds of tick for ``count`` schedules."""
    schedules = build_schedules(count)
    kinds = ("new", "existing", "idle", "look", "minute", "restart")
    timings: dict[str, list[float]] = {kind: [] for kind in kinds}
    with psycopg.connect(url, autocommit=True, options="-c jit=off") as conn:
        now = pinned_now(conn)
        for _ in range(REPEATS):
            database.truncate(url, "jobs", "pgbeat_schedule_history", "pgbeat_schedules")
            first, second = Scheduler(url, schedules), Scheduler(url, schedules)
            timings["new"].append(_timed(first, conn, now, count, inserted=True))
            timings["existing"].append(_timed(second, conn, now, count, inserted=False))
            later = now + timedelta(seconds=1)
            timings["idle"].append(_timed(first, conn, later, 0, inserted=True, refresh=False))
            timings["look"].append(_timed(first, conn, later, 0, inserted=True))
            conn.execute("ANALYZE")
            minute = now + timedelta(minutes=1)
            timings["minute"].append(_timed(first, conn, minute, count, inserted=True))
            restarted = now + timedelta(minutes=2)
            with Stopwatch() as watch:  # from the process's Scheduler() on
                third = Scheduler(url, schedules)
                got = len(third.tick(conn, restarted).inserted)
            if got != count:
                raise RuntimeError(f"a restart's tick gave {got} periods, expected {count}")
            timings["restart"].append(watch.seconds * 1000)
    return [_result(count, kind, values) for kind, values in timings.items()]


def _timed(
    scheduler: Scheduler,
    conn: psycopg.Connection[Any],
    now: datetime,
    expected: int,
    *,
    inserted: bool,
    refresh: bool = True,
) -> float:
    """Milliseconds of one tick; checks it inserted (or found) ``expected`` periods."""
    with Stopwatch() as watch:
        result = scheduler.tick(conn, now, refresh=refresh)
    got = len(result.inserted if inserted else result.existing)
    if got != expected:
        raise RuntimeError(f"a tick gave {got} periods, expected {expected}")
    return watch.seconds * 1000


def _result(count: int, kind: str, millis: list[float]) -> Result:
    meaning = {
        "new": "first tick, every period inserted",
        "existing": "another replica's first tick, every period already enqueued",
        "idle": "next tick a second later, nothing due, no look at the table",
        "look": "the same with the look at the table for changes (after a NOTIFY, every 5 s)",
        "minute": "a minute later, after ANALYZE, every period new",
        "restart": "a new replica two minutes later: load and claim",
    }[kind]
    return Result(
        SYSTEM,
        TICK,
        f"{count}-{kind}",
        round(statistics.median(millis), 2),
        "ms",
        f"{count} every=1m schedules: {meaning} (median of {len(millis)})",
        {"schedules": count, "rows": kind, "runs_ms": [round(m, 2) for m in millis]},
    )


def baseline(directory: str, url: str, counts: str) -> list[dict[str, Any]]:
    """This benchmark run against the pgbeat of another checkout (it measures in a database
    of its own, as ``main`` does)."""
    env = machine.revision_env(Path(directory) / "src")
    command = [sys.executable, "-m", "bench.scheduler_bench", "--url", url]
    done = subprocess.run(
        [*command, "--schedules", counts], env=env, capture_output=True, text=True, check=True
    )
    results: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


def side_by_side(before: list[dict[str, Any]], after: list[Result]) -> None:
    """Both revisions' medians and their ratio, on stderr."""
    old = {r["variant"]: r["value"] for r in before}
    log(f"{'tick':<18} {'baseline ms':>12} {'this ms':>10} {'ratio':>8}")
    for result in after:
        was = old.get(result.variant)
        ratio = f"{was / result.value:7.1f}x" if was and result.value else "-"
        shown = f"{was:12.1f}" if was is not None else f"{'-':>12}"
        log(f"{result.variant:<18} {shown} {result.value:10.1f} {ratio:>8}")


def main() -> None:
    parser = system_arguments(__doc__ or "")
    parser.add_argument("--schedules", default="1000,10000", help="comma-separated counts")
    parser.add_argument("--baseline", metavar="DIR", help="also measure this checkout's pgbeat")
    args = parse_system_arguments(parser)
    before = None
    if args.baseline:
        log(f"pgbeat of {args.baseline}: scheduler ticks with {args.schedules} schedules")
        before = baseline(args.baseline, args.url, args.schedules)
    results = []
    # a database of its own, dropped after: the tables of --url's database are left as found
    # (the suite's tests of `schedules next` read the schedules of DATABASE_URL's database)
    with database.fresh_database(args.url, "scheduler_this") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            pgbeat.apply_migrations(conn)
        for count in (int(c) for c in args.schedules.split(",")):
            log(f"pgbeat: scheduler ticks with {count} schedules")
            results.extend(tick_times(url, count))
    if before is not None:
        side_by_side(before, results)
    emit(results)


if __name__ == "__main__":
    main()
