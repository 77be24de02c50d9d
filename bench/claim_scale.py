"""The scheduler's claim alone (no start-up, no planning): N new periods on fresh tables
(never analyzed), a minute later (still unanalyzed), and after ANALYZE.

``python -m bench.claim_scale [--periods 10000,50000] [--repeats 2]``

Each repeat in a new database: N ``every = "1m"`` schedules, a replica started (its file
synced, the table loaded), then three claims of N new periods, each timed around
``claiming.claim`` (the history rows, the jobs, in one transaction). Start-up and the
Python planning of the periods are left out: the claim is what the database does. Beside
each wall time, the CPU the claim took in the server's backend (from Linux's
``/proc/PID/schedstat``, when the server runs on this machine) and in this process: on a
shared machine the wall time mostly says how loaded it was, the CPU times what the claim
costs. Results: lines on stderr, JSON on stdout. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import pgbeat
from bench import database
from bench.scheduler_bench import build_schedules, pinned_now
from pgbeat.scheduling import claiming, planning
from pgbeat.scheduling.scheduler import Scheduler


def server_cpu_ms(conn: psycopg.Connection[Any]) -> float:
    """CPU milliseconds the connection's backend has run, or NaN if this machine cannot
    say (a server elsewhere, not Linux)."""
    try:
        with open(f"/proc/{conn.info.backend_pid}/schedstat") as stat:
            return int(stat.read().split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        return float("nan")


def claim_once(
    scheduler: Scheduler, conn: psycopg.Connection[Any], at: datetime
) -> tuple[float, float, float]:
    """Milliseconds of the claim of the periods due at ``at``: wall, server CPU, client CPU."""
    groups = scheduler.catalog.take_due(at)
    made = planning.plan(scheduler.catalog, groups, at)
    server, client, started = server_cpu_ms(conn), time.process_time(), time.perf_counter()
    claims = claiming.claim(conn, scheduler.catalog, made, scheduler.replica)
    spent = (time.perf_counter() - started) * 1000
    client = (time.process_time() - client) * 1000
    server = server_cpu_ms(conn) - server
    scheduler.catalog.settle(groups, at, made.next_fires)
    if len(claims.inserted) != len(made.batch):
        raise RuntimeError(f"claimed {len(claims.inserted)} of {len(made.batch)} periods")
    return spent, server, client


def run(admin: str, count: int) -> dict[str, float]:
    found: dict[str, float] = {}
    with (
        database.fresh_database(admin, "claim_scale") as url,
        psycopg.connect(url, autocommit=True, options="-c jit=off") as conn,
    ):
        pgbeat.apply_migrations(conn)
        scheduler = Scheduler(url, build_schedules(count), heartbeat=False)
        now = pinned_now(conn)
        scheduler._start(conn)  # the file synced, the table loaded: not timed
        for minute, tables in enumerate(("fresh", "unanalyzed", "analyzed")):
            if tables == "analyzed":
                conn.execute("ANALYZE")
            spent = claim_once(scheduler, conn, now + timedelta(minutes=minute))
            found[f"{tables}_ms"] = spent[0]
            found[f"{tables}_server_cpu_ms"] = spent[1]
            found[f"{tables}_client_cpu_ms"] = spent[2]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--periods", default="10000,50000")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    admin = database.admin_url()
    figures: dict[str, Any] = {"when": datetime.now(UTC).isoformat(timespec="seconds")}
    for count in (int(c) for c in args.periods.split(",")):
        runs = [run(admin, count) for _ in range(args.repeats)]
        for found in runs:
            shown = ", ".join(f"{key} {value:.0f}" for key, value in found.items())
            print(f"[claim_scale] {count} periods: {shown}", file=sys.stderr, flush=True)
        figures[str(count)] = runs
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
