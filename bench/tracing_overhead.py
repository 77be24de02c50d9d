"""``python -m bench.tracing_overhead``: what tracing and middleware support cost a drain when
OpenTelemetry is not installed, against the code of another git revision, in one run.

Each round drains the same jobs with ``bench.pgbeat_bench.drain`` (one Worker, concurrency
100, batches of 100, a sync no-op handler) in a fresh interpreter per variant, the variants
interleaved so that a machine's load drifts over all of them alike:

- ``before``: pgbeat's ``src/`` at ``--base`` (default ``HEAD~1``), extracted with git archive;
- ``after``: this checkout's ``src/`` with ``opentelemetry`` blocked from importing (as if
  the ``otel`` extra were not installed);
- ``after+api``: this checkout with opentelemetry-api importable but no tracer provider.

Prints the median jobs/s of each and its ratio to ``before``. ``--executor`` measures the
executor alone instead (a no-op handler's runs through ``Executor``, no database): the CPU
path that tracing and middleware touch, without the database's noise on a shared machine.
``--instructions`` counts that path's instructions per job under valgrind's callgrind (the
runs of 2,200 jobs minus those of 200, so start-up and imports cancel out): the same count
whatever else the machine does, where the timings above move by 20 % between rounds.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg

from bench import database, machine
from bench.measure import URL_ENV, log

REPO_ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import os, sys
if sys.argv[2] == "block":
    sys.modules["opentelemetry"] = None  # as if opentelemetry were not installed
import time
from bench.pgbeat_bench import DrainConfig, drain
cpu = time.process_time()
result = drain(os.environ["{url_env}"], int(sys.argv[1]), DrainConfig(100, 100, is_async=False))
print(result.value, int(sys.argv[1]) / (time.process_time() - cpu))
""".replace("{url_env}", URL_ENV)
EXECUTOR_CHILD = """
import sys, threading, time
from datetime import UTC, datetime
if sys.argv[2] == "block":
    sys.modules["opentelemetry"] = None
import pgbeat
from pgbeat.job import Job
from pgbeat.worker.executor import Executor, Run
runs = int(sys.argv[1])
registry = pgbeat.Registry()
registry.register("noop", lambda payload: None)
handler = registry.get("noop")
done = threading.Event()
settled = [0]
def on_settled(run):
    settled[0] += 1
    if settled[0] == runs:
        done.set()
executor = Executor(8, on_settled)
now = datetime.now(UTC)
batch = [Run(Job(i, "noop", {}, 1, 3, now, now, None), handler, None, float("inf"))
         for i in range(runs)]
started, cpu = time.perf_counter(), time.process_time()
for i in range(0, runs, 100):
    executor.submit_many(batch[i:i + 100])
assert done.wait(120)
print(runs / (time.perf_counter() - started), runs / (time.process_time() - cpu))
executor.shutdown()
"""


def extract_source(revision: str, into: Path) -> Path:
    """pgbeat's ``src/`` at ``revision``, written under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", revision, "src"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def drain_once(url: str, src: Path, jobs: int, otel: str, script: str) -> tuple[float, float]:
    """Jobs per second of one drain by the pgbeat in ``src``, in a fresh interpreter: per
    second of wall-clock time, and per second of the process's CPU time (which other
    processes' load on a shared machine disturbs far less)."""
    env = machine.revision_env(src, **{URL_ENV: url})
    done = subprocess.run(
        [sys.executable, "-c", script, str(jobs), otel],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=600,
        check=True,
    )
    wall, cpu = done.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


VALGRIND = ("valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null")


def instructions_per_job(src: Path, otel: str, runs: int = 2000) -> float:
    """The executor path's instructions per job (callgrind), start-up subtracted."""
    env = machine.revision_env(src)
    counts = []
    for jobs in (200, 200 + runs):
        done = subprocess.run(
            [*VALGRIND, sys.executable, "-c", EXECUTOR_CHILD, str(jobs), otel],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO_ROOT,
            timeout=900,
            check=True,
        )
        collected = re.search(r"Collected : (\d+)", done.stderr)
        if collected is None:
            raise SystemExit(f"valgrind printed no count: {done.stderr[-500:]}")
        counts.append(int(collected.group(1)))
    return (counts[1] - counts[0]) / runs


def count_instructions(base: str, rounds: int, no_api: bool) -> None:
    """Print the executor path's instructions per job of each variant."""
    with tempfile.TemporaryDirectory() as folder:
        variants = {
            "before": (extract_source(base, Path(folder)), "allow"),
            "after": (REPO_ROOT / "src", "block"),
            "after+api": (REPO_ROOT / "src", "allow"),
        }
        if no_api:
            del variants["after+api"]
        counts: dict[str, list[float]] = {name: [] for name in variants}
        for round_number in range(1, rounds + 1):
            for name, (src, otel) in variants.items():
                counts[name].append(instructions_per_job(src, otel))
                log(f"round {round_number}: {name} {counts[name][-1]:,.0f} instructions per job")
    print(f"executor path, instructions per no-op job (callgrind), median of {rounds} rounds")
    before = statistics.median(counts["before"])
    for name, values in counts.items():
        median = statistics.median(values)
        print(f"  {name:10} {median:10,.0f} ({median / before:5.3f} x before)")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing_overhead", description=__doc__)
    parser.add_argument("--base", default="HEAD~1", help="the git revision to compare with")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--executor", action="store_true", help="the executor alone, no database")
    parser.add_argument("--no-api", action="store_true", help="leave out the after+api variant")
    parser.add_argument(
        "--instructions", action="store_true", help="count the executor's instructions (valgrind)"
    )
    args = parser.parse_args()
    if args.instructions:
        count_instructions(args.base, args.rounds, args.no_api)
        return
    script = EXECUTOR_CHILD if args.executor else CHILD
    admin = database.admin_url()
    with tempfile.TemporaryDirectory() as folder, database.fresh_database(admin, "otel") as url:
        variants = {
            "before": (extract_source(args.base, Path(folder)), "allow"),
            "after": (REPO_ROOT / "src", "block"),
            "after+api": (REPO_ROOT / "src", "allow"),
        }
        if args.no_api:
            del variants["after+api"]
        from pgbeat.db.migrate import apply_migrations

        with psycopg.connect(url, autocommit=True) as conn:
            apply_migrations(conn)
        rates: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
        for round_number in range(1, args.rounds + 1):
            for name, (src, otel) in variants.items():
                wall, cpu = drain_once(url, src, args.jobs, otel, script)
                rates[name].append((wall, cpu))
                log(f"round {round_number}: {name} {wall:,.0f} jobs/s, {cpu:,.0f} per CPU-s")
    what = "executor runs" if args.executor else "drain"
    print(f"{what} of {args.jobs} no-op jobs, median of {args.rounds} interleaved rounds")
    before = [statistics.median(r[i] for r in rates["before"]) for i in (0, 1)]
    for name, values in rates.items():
        wall, cpu = (statistics.median(r[i] for r in values) for i in (0, 1))
        print(
            f"  {name:10} {wall:10,.0f} jobs/s ({wall / before[0]:5.3f} x before)"
            f"  {cpu:10,.0f} jobs per CPU-second ({cpu / before[1]:5.3f} x before)"
        )


if __name__ == "__main__":
    main()
