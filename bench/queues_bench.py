"""``python -m bench.queues_bench``: the Queues page, the overview and ``pgbeat queues list``
at 20,000 queues.

Builds (once, then reuses) a database ``pgbeat_queues_bench``: 1,000,000 pending jobs over
20,000 queues (30 due and 20 delayed in each), 200 running jobs, and settings rows for
2,000 of the queues (paused, limited, fair). Each side (this revision, and another
revision's ``src/`` with ``--base-src``) is measured in a child process that imports its
pgbeat, serves the dashboard on the database and times each page (the median of
``--repeat`` requests, over loopback), then ``pgbeat queues list --json`` run in-process (the
command's own time after the interpreter's start-up). Sides alternate round by round
(A B A B), so both see the same machine. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
from psycopg import sql

from bench.database import admin_url, with_database

DATABASE = "pgbeat_queues_bench"
QUEUES = 20_000
DUE, DELAYED = 30, 20  # pending jobs per queue
TARGET_MS = 300.0
REPO_ROOT = Path(__file__).resolve().parents[1]
CHILD_TIMEOUT = 900.0

# 50 pending jobs per queue, one queue after another's: 30 due (oldest first in queue
# order, so queue 0 holds the oldest due job), 20 delayed by up to a day. Insert order is
# interleaved by queue, as jobs arrive.
BUILD = """
INSERT INTO jobs (kind, payload, queue, run_at, created_at, limit_key)
SELECT 'kind_' || (n %% 50), '{}', 'tenant-' || lpad(q::text, 5, '0'),
       CASE WHEN n < %(due)s
            THEN now() - interval '2 hours' + (q * %(due)s + n) * interval '1 ms'
            ELSE now() + (1 + n) * interval '1 hour' END,
       now() - interval '3 hours', 'key' || (n %% 5)
FROM generate_series(0, %(due)s + %(delayed)s - 1) AS n, generate_series(0, %(queues)s - 1) AS q
"""
# 200 running jobs, one in each of the first 200 queues.
RUNNING = """
UPDATE jobs SET status = 'running', locked_until = now() + interval '1 day',
       started_at = now(), attempts = 1
WHERE id IN (SELECT min(id) FROM jobs WHERE queue < 'tenant-00200' GROUP BY queue)
"""
# Every tenth queue has a row: paused, limited (concurrency, per key, rate) or fair.
SETTINGS = """
INSERT INTO pgbeat_queues (name, paused, concurrency, key_concurrency, rate_count, rate_period,
                           fair)
SELECT 'tenant-' || lpad(q::text, 5, '0'), q %% 40 = 0, 5, CASE WHEN q %% 20 = 0 THEN 1 END,
       100, interval '10 s', q %% 30 = 0
FROM generate_series(0, %(queues)s - 1, 10) AS q
ON CONFLICT (name) DO NOTHING
"""


def build(url: str, queues: int) -> None:
    """Create the database and its rows unless a complete one is already there."""
    with psycopg.connect(admin_url(), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    import pgbeat  # this revision's migrations: the base side reads the same schema

    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        have = conn.execute("SELECT count(*) FROM jobs").fetchone()
        if have and have[0] == queues * (DUE + DELAYED):
            return
        print(f"building {queues * (DUE + DELAYED):,} jobs in {DATABASE} ...", file=sys.stderr)
        started = time.monotonic()
        conn.execute("TRUNCATE jobs, pgbeat_queues RESTART IDENTITY")
        conn.execute(BUILD, {"due": DUE, "delayed": DELAYED, "queues": queues})
        conn.execute(RUNNING)
        conn.execute(SETTINGS, {"queues": queues})
        conn.execute("VACUUM ANALYZE jobs, pgbeat_queues")
        print(f"built in {time.monotonic() - started:.0f} s", file=sys.stderr)


def pages(queues: int) -> list[tuple[str, str]]:
    """(label, path) of the pages measured."""
    last = f"tenant-{queues - 150:05d}"
    return [
        ("queues, first page", "/queues"),
        ("queues, filter (1 match)", "/queues?name=09999"),
        ("queues, filter (11,111 match)", "/queues?name=TENANT-1"),
        ("queues, late page", f"/queues?after={last}"),
        ("queues, filtered late page", f"/queues?name=tenant-1&after={last}"),
        ("overview", "/"),
    ]


def commands(queues: int) -> list[tuple[str, list[str]]]:
    """(label, argv) of the `pgbeat queues list` commands measured."""
    last = f"tenant-{queues - 150:05d}"
    return [
        ("queues list --json", ["queues", "list", "--json"]),
        ("queues list --json --name 09999", ["queues", "list", "--json", "--name", "09999"]),
        ("queues list --json --after (late)", ["queues", "list", "--json", "--after", last]),
    ]


def run_command(argv: list[str]) -> float:
    """Milliseconds of one `pgbeat ARGV` in this process, its output discarded."""
    from pgbeat.cli.main import main

    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    elapsed = (time.perf_counter() - started) * 1000
    if status != 0:
        raise RuntimeError(f"pgbeat {' '.join(argv)} exited {status}")
    return elapsed


def child(url: str, queues: int, repeat: int) -> dict[str, float]:
    """Median milliseconds of each page and command, on the pgbeat this process imports."""
    from bench.ui_bench import Server

    found: dict[str, float] = {}
    with Server(url, Path()) as base, httpx.Client(base_url=base, timeout=60) as client:
        client.get("/").raise_for_status()  # opens the pool
        for label, path in pages(queues):
            client.get(path).raise_for_status()  # warm the cache
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                client.get(path).raise_for_status()
                times.append((time.perf_counter() - started) * 1000)
            found[label] = statistics.median(times)
    os.environ["DATABASE_URL"] = url
    for label, argv in commands(queues):
        run_command(argv)  # warm
        found[label] = statistics.median(run_command(argv) for _ in range(repeat))
    return found


def measure_side(src: Path, url: str, queues: int, repeat: int) -> dict[str, float]:
    """One child's figures, importing pgbeat from ``src``."""
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{REPO_ROOT}"}
    argv = [sys.executable, "-m", "bench.queues_bench", "--child", "--queues", str(queues)]
    argv += ["--repeat", str(repeat), "--url", url]
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"child on {src} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.queues_bench", description=__doc__)
    parser.add_argument("--queues", type=int, default=QUEUES)
    parser.add_argument("--repeat", type=int, default=5, help="requests per page and side")
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the sides")
    parser.add_argument("--base-src", type=Path, help="another revision's src/ to compare")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.url, args.queues, args.repeat)))
        return 0
    url = with_database(admin_url(), DATABASE)
    build(url, args.queues)
    sides = [("this", REPO_ROOT / "src")]
    if args.base_src:
        sides.insert(0, ("base", args.base_src.resolve()))
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in sides}
    for _ in range(args.rounds):
        for name, src in sides:
            runs[name].append(measure_side(src, url, args.queues, args.repeat))
    labels = list(runs["this"][0])
    table = {
        name: {label: statistics.median(run[label] for run in found) for label in labels}
        for name, found in runs.items()
    }
    if args.json:
        print(json.dumps({"load": os.getloadavg(), "ms": table}, indent=2))
        return 0
    names = [name for name, _ in sides]
    print(f"{args.queues:,} queues; load average {os.getloadavg()[0]:.2f}")
    print(f"{'page or command':<36}" + "".join(f"{n:>10}" for n in names))
    for label in labels:
        cells = "".join(f"{table[n][label]:>8.1f}ms" for n in names)
        flag = "" if table["this"][label] < TARGET_MS else "  over target"
        print(f"{label:<36}{cells}{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
