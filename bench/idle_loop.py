"""What the scheduler's loop pays for an iteration with nothing due, as the loop runs it.

``python -m bench.idle_loop [--schedules 1000,10000] [--iterations 200]``

``bench.scheduler_bench``'s ``idle`` row times ``Scheduler.tick`` alone; the loop's
iteration (``Scheduler._tick_on``) also reads the database's clock, and at least every
5 s (``MAX_SLEEP``, or after a NOTIFY of a change) asks the table for changes and checks
that its schedules file is still in effect. This times that iteration in a database of its
own, N ``every = "1h"`` schedules (nothing falls due), the table analyzed, in three
states: between looks (woken early, by a deadline's due time or a fire of another group),
a look due (every wake of an idle replica: it sleeps 5 s at most), and a look with the
file check (a replica with a schedules file). Each row: median and p90 milliseconds and
statements (round trips) per iteration. No heartbeat (its beat is a separate, timed
cost). Lines on stderr, JSON on stdout. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import pgbeat
from bench import database
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler


def hourly(count: int) -> list[Schedule]:
    """``count`` schedules every hour: none is due in the seconds the run lasts."""
    every = timedelta(hours=1)
    return [Schedule(name=f"hourly_{i}", kind="hourly", every=every) for i in range(count)]


class Counted:
    """Counts the statements run on any cursor of this process (each is a round trip)."""

    calls = 0

    @classmethod
    def install(cls) -> None:
        original = psycopg.Cursor.execute

        def execute(self: psycopg.Cursor[Any], *args: Any, **kwargs: Any) -> Any:
            cls.calls += 1
            return original(self, *args, **kwargs)

        psycopg.Cursor.execute = execute  # type: ignore[method-assign]


def iterations(
    scheduler: Scheduler, conn: psycopg.Connection[Any], state: str, n: int
) -> dict[str, float]:
    """Median and p90 ms, and statements, of ``n`` iterations of the loop in ``state``."""
    before = Counted.calls
    spent = []
    for _ in range(n):
        scheduler._heard = False
        scheduler._next_refresh = 0.0 if state != "between looks" else time.monotonic() + 60
        scheduler._next_file_check = 0.0 if state == "look + file check" else time.monotonic() + 60
        started = time.perf_counter()
        scheduler._tick_on(conn, time.monotonic())
        spent.append((time.perf_counter() - started) * 1000)
    spent.sort()
    return {
        "median_ms": round(statistics.median(spent), 3),
        "p90_ms": round(spent[int(len(spent) * 0.9)], 3),
        "statements": (Counted.calls - before) / n,
    }


def run(admin: str, count: int, n: int) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    with (
        database.fresh_database(admin, "idle_loop") as url,
        psycopg.connect(url, autocommit=True, options="-c jit=off") as conn,
    ):
        pgbeat.apply_migrations(conn)
        scheduler = Scheduler(url, hourly(count), heartbeat=False)
        scheduler._tick_on(conn, time.monotonic())  # start-up: the file synced, the table loaded
        # as autovacuum does within a minute of the sync: unanalyzed, the look at 10,000 rows
        # is a sequential scan (about 2 ms) instead of two probes of pgbeat_schedules_changed
        conn.execute("ANALYZE pgbeat_schedules")
        for state in ("between looks", "look due", "look + file check"):
            found[state] = iterations(scheduler, conn, state, n)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--schedules", default="1000,10000")
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    admin = database.admin_url()
    Counted.install()
    figures: dict[str, Any] = {"when": datetime.now(UTC).isoformat(timespec="seconds")}
    for count in (int(c) for c in args.schedules.split(",")):
        figures[str(count)] = found = run(admin, count, args.iterations)
        for state, row in found.items():
            shown = ", ".join(f"{key} {value}" for key, value in row.items())
            print(f"[idle_loop] {count} schedules, {state}: {shown}", file=sys.stderr, flush=True)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
