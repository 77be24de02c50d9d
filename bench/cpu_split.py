"""Where a drain's time goes: CPU per job of each of the worker's threads and of the server,
beside the raw batched loop, in one run on one database.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test python -m bench.cpu_split

Each round drains ``--jobs`` no-op jobs three ways, in turn: the raw batched loop of
bench/raw_sql.py (4 threads, claims of 100), and a ``pgbeat.Worker`` in this process with
``concurrency = claim_batch`` = 200 and 100. For each it reports the wall time per job (from
the start until no job is left pending or running), the interpreter's CPU per job by thread
(the worker's claim loop, its outcome writer, its handler threads, read from
``/proc/self/task/<tid>/schedstat`` in nanoseconds) and the server's (every ``postgres``
process's user and system time, exited backends included through the postmaster's
children's times; in clock ticks, so figures from drains shorter than a second are coarse;
``null`` when the server is not a process of this machine). The median of the rounds is
kept. Two cores here: a drain's wall time per job is at least the sum of its CPU per job
over the cores, and the raw loop's 4 connections keep both busy where a worker's one claim
at a time waits for the server (docs/benchmarks.md, "Where a drain's time goes").
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from bench import database, machine, pgbeat_bench, raw_sql
from bench.report import save_report

THREADS = {
    pgbeat_bench.LOOP_THREAD: "loop",
    "pgbeat-outcomes": "outcomes",
    "pgbeat-handler": "handlers",
}
CONCURRENCIES = (200, 100)


def server_seconds() -> float | None:
    """CPU seconds of every postgres process of this machine so far (exited backends
    included: the postmaster's children's times), or None when there is none to read."""
    spent, seen = 0.0, False
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name, seconds = machine.process_cpu(entry.name, children=True)
        except OSError:
            continue  # gone since the listing
        if name == "postgres":
            spent, seen = spent + seconds, True
    return spent if seen else None


def thread_seconds() -> dict[str, float]:
    """CPU seconds so far of this process's threads, summed by role (THREADS)."""
    found: dict[str, float] = {}
    for thread in threading.enumerate():
        role = next((r for p, r in THREADS.items() if thread.name.startswith(p)), "other")
        try:
            ns = int(Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        found[role] = found.get(role, 0.0) + ns / 1e9
    return found


class Meter:
    """Around a drain of ``jobs``: the CPU spent inside it, the process's (every thread's,
    ended ones too) and the server's, and, read at its end, the live threads' by role; per
    job, in microseconds, in ``found``."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self.found: dict[str, float] = {}

    def __enter__(self) -> Meter:
        self._roles = thread_seconds()
        self._process = _process_seconds()
        self._server = server_seconds()
        self._wall = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        wall = time.perf_counter() - self._wall
        roles, process, server = thread_seconds(), _process_seconds(), server_seconds()
        found = {"wall_us": wall, "python_us": process - self._process}
        for role in ("loop", "outcomes", "handlers"):
            if role in roles:
                found[f"{role}_us"] = roles[role] - self._roles.get(role, 0.0)
        if server is not None and self._server is not None:
            found["server_us"] = server - self._server
        self.found = {key: round(seconds * 1e6 / self.jobs, 2) for key, seconds in found.items()}


def _process_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def raw_drain(url: str, jobs: int) -> dict[str, float]:
    """The raw batched loop on ``jobs`` pending jobs (its connections made before)."""
    meter = Meter(jobs)
    raw_sql.drain(url, jobs, 100, measured=meter)
    return meter.found


def worker_drain(url: str, jobs: int, concurrency: int) -> dict[str, float]:
    """A Worker in this process on ``jobs`` pending jobs (pgbeat_bench.run_worker), from
    its start until none is left pending or running, read before it stops: its threads'
    times go with them."""
    pgbeat_bench.load(url, jobs)
    meter = Meter(jobs)
    config = pgbeat_bench.DrainConfig(concurrency, concurrency, is_async=False)
    pgbeat_bench.run_worker(url, jobs, config, measured=meter)
    return meter.found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("DATABASE_URL"), help="admin database")
    parser.add_argument("--jobs", type=int, default=60_000, help="jobs per drain (60,000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three (3)")
    parser.add_argument("--output", type=Path, help="where the JSON goes")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error("give --url or set DATABASE_URL")
    started_at = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    drains: dict[str, Callable[[str], dict[str, float]]] = {
        "raw_batched": partial(raw_drain, jobs=args.jobs)
    }
    for concurrency in CONCURRENCIES:
        drains[f"pgbeat_c{concurrency}"] = partial(
            worker_drain, jobs=args.jobs, concurrency=concurrency
        )
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in drains}
    with database.fresh_database(args.url, "cpu_split") as url:
        raw_sql.migrate(url)
        for _ in range(args.rounds):
            for name, drain in drains.items():
                runs[name].append(drain(url))
                print(f"{name}: {_line(runs[name][-1])}", file=sys.stderr)
    medians = {
        name: {key: round(statistics.median(r[key] for r in found), 2) for key in found[-1]}
        for name, found in runs.items()
    }
    report = {
        "started_at": started_at,
        "jobs": args.jobs,
        "rounds": args.rounds,
        "machine": machine.facts(),
        "median_per_job": medians,
        "runs": runs,
    }
    save_report(report, "cpu-split", args.output)
    for name, row in medians.items():
        print(f"{name:12} {_line(row)}", file=sys.stderr)
    return 0


def _line(row: dict[str, Any]) -> str:
    return "  ".join(f"{key[:-3]} {value:.2f}" for key, value in row.items())


if __name__ == "__main__":
    sys.exit(main())
