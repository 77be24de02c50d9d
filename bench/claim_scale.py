"""The scheduler's claim alone (no start-up, no planning): N new periods on fresh tables
(never analyzed), a minute later (still unanalyzed), and after ANALYZE.

``python -m bench.claim_scale [--periods 10000,50000] [--repeats 2] [--base-src DIR]``

Each repeat in a new database: N ``every = "1m"`` schedules, a replica started (its file
synced, the table loaded), then three claims of N new periods, each timed around
``claiming.claim`` (the history rows, the jobs, in one transaction). Start-up and the
Python planning of the periods are left out: the claim is what the database does. Beside
each wall time, the CPU the claim took in the server's backend (from Linux's
``/proc/PID/schedstat``, when the server runs on this machine) and in this process, and
the WAL it wrote: on a shared machine the wall time mostly says how loaded it was, the CPU
times and the WAL what the claim costs. Each repeat runs in a child interpreter; with
``--base-src`` (another revision's ``src/``, e.g. a ``git archive`` of main) the two
revisions alternate, repeat by repeat, in one run. Results: lines on stderr, JSON on
stdout. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

import pgbeat  # children: the revision their PYTHONPATH puts first
from bench import database, machine
from bench.scheduler_bench import build_schedules, pinned_now
from pgbeat.scheduling import claiming, planning
from pgbeat.scheduling.scheduler import Scheduler

TABLES = ("fresh", "unanalyzed", "analyzed")
CHILD_TIMEOUT = 900.0


def server_cpu_ms(conn: psycopg.Connection[Any]) -> float:
    """CPU milliseconds the connection's backend has run, or NaN if this machine cannot
    say (a server elsewhere, not Linux)."""
    try:
        with open(f"/proc/{conn.info.backend_pid}/schedstat") as stat:
            return int(stat.read().split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        return float("nan")


def wal_lsn(conn: psycopg.Connection[Any]) -> int:
    """The WAL insert position, in bytes (the server's, so other databases' writes count
    too: the embedded server of a benchmark run has none)."""
    row = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def claim_once(
    scheduler: Scheduler, conn: psycopg.Connection[Any], at: datetime
) -> dict[str, float]:
    """The claim of the periods due at ``at``: wall, server CPU and client CPU
    milliseconds, and WAL kilobytes."""
    groups = scheduler.catalog.take_due(at)
    made = planning.plan(scheduler.catalog, groups, at)
    wal = wal_lsn(conn)
    server, client, started = server_cpu_ms(conn), time.process_time(), time.perf_counter()
    claims = claiming.claim(conn, scheduler.catalog, made, scheduler.replica)
    spent = (time.perf_counter() - started) * 1000
    client = (time.process_time() - client) * 1000
    server = server_cpu_ms(conn) - server
    wal_kb = (wal_lsn(conn) - wal) / 1024
    scheduler.catalog.settle(groups, at, made.next_fires)
    if len(claims.inserted) != len(made.batch):
        raise RuntimeError(f"claimed {len(claims.inserted)} of {len(made.batch)} periods")
    return {"ms": spent, "server_cpu_ms": server, "client_cpu_ms": client, "wal_kb": wal_kb}


def run(url: str, count: int) -> dict[str, float]:
    """Three claims of ``count`` new periods on the (fresh) database ``url``."""
    found: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True, options="-c jit=off") as conn:
        pgbeat.apply_migrations(conn)
        scheduler = Scheduler(url, build_schedules(count), heartbeat=False)
        now = pinned_now(conn)
        scheduler._start(conn)  # the file synced, the table loaded: not timed
        for minute, tables in enumerate(TABLES):
            if tables == "analyzed":
                conn.execute("ANALYZE")
            spent = claim_once(scheduler, conn, now + timedelta(minutes=minute))
            found.update({f"{tables}_{key}": value for key, value in spent.items()})
    return found


def run_child(src: Path, admin: str, count: int) -> dict[str, float]:
    """One repeat in a child interpreter on a fresh database, importing pgbeat from ``src``."""
    with database.fresh_database(admin, "claim_scale") as url:
        command = [sys.executable, "-m", "bench.claim_scale", "--child", "--url", url]
        command += ["--periods", str(count)]
        done = subprocess.run(
            command, env=machine.revision_env(src), cwd=machine.REPO_ROOT,
            capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"claim_scale child failed: {done.stderr[-2000:]}")
        result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--periods", default="10000,50000")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--base-src", type=Path, help="another revision's src/ to compare")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.url, int(args.periods))))
        return
    admin = database.admin_url()
    here = machine.REPO_ROOT / "src"
    sides = [("this", here)] + ([("base", args.base_src.resolve())] if args.base_src else [])
    figures: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine.facts(),
    }
    for count in (int(c) for c in args.periods.split(",")):
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in sides}
        for repeat in range(args.repeats):
            order = sides if repeat % 2 == 0 else sides[::-1]  # alternated: neither always first
            for name, src in order:
                found = run_child(src, admin, count)
                found["load_1m"] = machine.load()
                runs[name].append(found)
                shown = ", ".join(f"{key} {value:.0f}" for key, value in found.items())
                print(f"[claim_scale] {name} {count}: {shown}", file=sys.stderr, flush=True)
        for name, repeats in runs.items():
            medians = {
                f"{tables}_{key}": statistics.median(r[f"{tables}_{key}"] for r in repeats)
                for tables in TABLES
                for key in ("ms", "server_cpu_ms", "wal_kb")
            }
            shown = ", ".join(f"{key} {value:.0f}" for key, value in medians.items())
            print(f"[claim_scale] {name} {count} medians: {shown}", file=sys.stderr, flush=True)
        figures[str(count)] = runs
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
