"""``python -m bench.steering``: the figures of steered jobs, measured on one PostgreSQL.

Renewed leases (long handlers under a short lease in several worker processes: reaped and
run twice while their worker lives; then kill -9 of one worker: how long until each of its
jobs is taken back), cancel latency (async and sync handlers, from the cancel's commit to
the job ending cancelled), ``pgbeat.wait`` latency (from the completion's commit to the
waiter returning), and a drain with 1 KiB results against one without, A/B in one run.
docs/reliability.md and docs/benchmarks.md give the figures and the command.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
from tests.apps.steer_app import SETUP  # the workers run that app: its tables

import pgbeat
from bench import database
from pgbeat.durations import parse_duration

ROOT = Path(__file__).resolve().parents[1]
APP = "tests.apps.steer_app:registry"
KILOBYTE_RESULT = {"blob": "x" * 1000}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def start_worker(url: str, *flags: str) -> subprocess.Popen[bytes]:
    env = {"DATABASE_URL": url, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"}
    return subprocess.Popen(
        [sys.executable, "-m", "pgbeat", "worker", APP, "--log-level", "WARNING", *flags],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def stop(processes: list[subprocess.Popen[bytes]]) -> str:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    return "".join(p.communicate(timeout=60)[0].decode(errors="replace") for p in processes)


def scalar(conn: psycopg.Connection[Any], query: Any, *args: Any) -> Any:
    row = conn.execute(query, args).fetchone()
    return None if row is None else row[0]


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def long_jobs(
    url: str, handlers: int, seconds: float, lease: str, processes: int
) -> dict[str, Any]:
    """``handlers`` jobs of ``seconds`` each under ``lease``: reaped? run twice? Then kill -9."""
    database.truncate(url, "jobs", "executions", "ends")
    per_process = -(-handlers // processes)
    flags = ("--concurrency", str(per_process), "--lease", lease, "--timeout", "3h")
    workers = [start_worker(url, *flags) for _ in range(processes)]
    with psycopg.connect(url, autocommit=True) as conn:
        ids = pgbeat.enqueue_many(
            conn, [pgbeat.NewJob("sleepy", {"seconds": seconds}) for _ in range(handlers)]
        )
        for job_id in ids:
            pgbeat.wait(conn, job_id, timeout=seconds * 2 + 120)
        runs = scalar(conn, "SELECT count(*) FROM executions")
        renewals_ok = scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'done'")
    output = stop(workers)
    figures: dict[str, Any] = {
        "jobs": handlers,
        "job_seconds": seconds,
        "lease": lease,
        "processes": processes,
        "done": renewals_ok,
        "reaped": output.count("lease expired"),
        "run_twice": runs - handlers,
    }
    figures.update(kill_9(url, handlers, lease, processes))
    return figures


def kill_9(url: str, handlers: int, lease: str, processes: int) -> dict[str, Any]:
    """Long jobs on ``processes`` workers; kill -9 one: when is each of its jobs taken back?"""
    database.truncate(url, "jobs", "executions", "ends")
    per_process = -(-handlers // processes)
    flags = ("--concurrency", str(per_process), "--lease", lease, "--timeout", "3h")
    workers = [start_worker(url, *flags) for _ in range(processes)]
    lease_s = parse_duration(lease).total_seconds()
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("sleepy", {"seconds": 3600})] * handlers)
        wait_until(
            lambda: scalar(conn, "SELECT count(*) FROM executions") == handlers, 60, "all running"
        )
        time.sleep(lease_s)  # renewals have happened: the kill falls between two of them
        victim = workers[0]
        doomed = [
            r[0]
            for r in conn.execute(
                "SELECT job_id FROM executions WHERE pid = %s", (victim.pid,)
            ).fetchall()
        ]
        victim.kill()
        killed = time.monotonic()
        back: dict[int, float] = {}
        while len(back) < len(doomed) and time.monotonic() - killed < lease_s + 60:
            rows = conn.execute(
                "SELECT id FROM jobs WHERE id = ANY(%s) AND last_error LIKE 'lease expired%%'",
                (doomed,),
            ).fetchall()
            for (job_id,) in rows:
                back.setdefault(job_id, time.monotonic() - killed)
            time.sleep(0.05)
    stop(workers)
    seconds = list(back.values())
    return {
        "killed_jobs": len(doomed),
        "taken_back": len(back),
        "taken_back_p50_s": round(percentile(seconds, 0.5), 2) if seconds else None,
        "taken_back_p99_s": round(percentile(seconds, 0.99), 2) if seconds else None,
    }


def cancel_latency(url: str, samples: int) -> dict[str, Any]:
    """From a committed cancel_job to the job ending cancelled, async and sync handlers."""
    database.truncate(url, "jobs", "executions", "ends")
    workers = [start_worker(url, "--concurrency", "4", "--lease", "10s")]
    figures: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for kind in ("async_sleepy", "sleepy"):
            lags = []
            for _ in range(samples):
                job_id = pgbeat.enqueue(conn, kind, {"seconds": 60})
                assert job_id is not None
                wait_until(
                    lambda job_id=job_id: scalar(
                        conn, "SELECT count(*) FROM executions WHERE job_id = %s", job_id
                    ),
                    30,
                    "the handler started",
                )
                asked = time.monotonic()
                pgbeat.cancel_job(conn, job_id)
                pgbeat.wait(conn, job_id, timeout=10)
                lags.append((time.monotonic() - asked) * 1000)
            figures[f"{kind}_p50_ms"] = round(percentile(lags, 0.5), 1)
            figures[f"{kind}_p99_ms"] = round(percentile(lags, 0.99), 1)
    stop(workers)
    return figures


def wait_latency(url: str, samples: int) -> dict[str, Any]:
    """From a completion's commit (bounded by its statement's start) to wait returning."""
    database.truncate(url, "jobs")
    workers = [start_worker(url, "--concurrency", "4")]
    lags = []
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(samples):
            job_id = pgbeat.enqueue(conn, "result", {"value": 1})
            assert job_id is not None
            pgbeat.wait(conn, job_id, timeout=10)
            lag = scalar(
                conn,
                "SELECT extract(epoch FROM clock_timestamp() - finished_at) FROM jobs "
                "WHERE id = %s",
                job_id,
            )
            lags.append(float(lag) * 1000)
    stop(workers)
    return {
        "wait_p50_ms": round(percentile(lags, 0.5), 1),
        "wait_p99_ms": round(percentile(lags, 0.99), 1),
    }


# Whether the drain is over: a probe of the pending/running rows only, whose cost does
# not grow with the done rows' width (a count of done rows read every row, results and
# all, and so charged the results side for the bench's own polling).
UNFINISHED = "SELECT EXISTS (SELECT FROM jobs WHERE status IN ('pending', 'running'))"
# From the drain's start (the database clock) to the last job's finish.
DRAIN_SECONDS = "SELECT extract(epoch FROM max(finished_at) - %s::timestamptz) FROM jobs"


def drain_seconds(url: str, jobs: int, with_results: bool) -> float:
    """An in-process worker (concurrency 10) from start until every job is done, by the
    database clock: the start read just before the worker starts, the end the last job's
    ``finished_at``."""
    database.truncate(url, "jobs")
    with psycopg.connect(url, autocommit=True) as conn:
        for start in range(0, jobs, 10_000):
            pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop")] * min(10_000, jobs - start))
    database.vacuum_analyze(url)
    registry = pgbeat.Registry()
    value = KILOBYTE_RESULT if with_results else None
    registry.register("noop", lambda payload: value)
    worker = pgbeat.Worker(url, registry, pgbeat.WorkerSettings(heartbeat=False))
    thread = threading.Thread(target=worker.run, daemon=True)
    with psycopg.connect(url, autocommit=True) as conn:
        started = scalar(conn, "SELECT clock_timestamp()")
        thread.start()
        wait_until(lambda: not scalar(conn, UNFINISHED), 600, "the drain")
        seconds = float(scalar(conn, DRAIN_SECONDS, started))
        done = scalar(conn, "SELECT count(*) FROM jobs WHERE status = 'done'")
    worker.stop()
    thread.join(30)
    if done != jobs:
        raise RuntimeError(f"the drain ended with {done} of {jobs} jobs done")
    return seconds


def results_drain(url: str, jobs: int, rounds: int) -> dict[str, Any]:
    """Drains without and with 1 KiB results, interleaved, each side first in every other
    round (a drain that always ran second ran on warmer caches); the median of each."""
    plain: list[float] = []
    results: list[float] = []
    for n in range(rounds):
        for with_results in (False, True) if n % 2 == 0 else (True, False):
            (results if with_results else plain).append(drain_seconds(url, jobs, with_results))
    plain_rate, results_rate = jobs / statistics.median(plain), jobs / statistics.median(results)
    return {
        "drain_jobs": jobs,
        "rounds": rounds,
        "without_results_jobs_per_s": round(plain_rate),
        "with_1kib_results_jobs_per_s": round(results_rate),
        "ratio": round(results_rate / plain_rate, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.steering", description=__doc__)
    parser.add_argument("--handlers", type=int, default=20, help="long jobs at once (20)")
    parser.add_argument("--duration", default="10m", help="each long job's run time (10m)")
    parser.add_argument("--lease", default="10s", help="the workers' --lease (10s)")
    parser.add_argument("--processes", type=int, default=3, help="worker processes (3)")
    parser.add_argument("--samples", type=int, default=20, help="cancel samples per kind (20)")
    parser.add_argument("--wait-samples", type=int, default=100, help="wait samples (100)")
    parser.add_argument("--drain-jobs", type=int, default=20_000, help="jobs per drain (20,000)")
    parser.add_argument("--rounds", type=int, default=3, help="drains of each kind (3)")
    parser.add_argument("--skip-long", action="store_true", help="no long-jobs phase")
    parser.add_argument("--skip-drain", action="store_true", help="no results drain")
    args = parser.parse_args(argv)
    admin = database.admin_url()
    figures: dict[str, Any] = {}
    with database.fresh_database(admin, "steering") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            pgbeat.apply_migrations(conn)
            conn.execute(SETUP.encode())
        if not args.skip_long:
            seconds = parse_duration(args.duration).total_seconds()
            figures["renewal"] = long_jobs(url, args.handlers, seconds, args.lease, args.processes)
            print(json.dumps(figures["renewal"]), flush=True)
        figures["cancel"] = cancel_latency(url, args.samples)
        print(json.dumps(figures["cancel"]), flush=True)
        figures["wait"] = wait_latency(url, args.wait_samples)
        print(json.dumps(figures["wait"]), flush=True)
        if not args.skip_drain:
            figures["results"] = results_drain(url, args.drain_jobs, args.rounds)
            print(json.dumps(figures["results"]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
