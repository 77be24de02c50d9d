"""A soak: a steady stream of jobs through one `pgbeat worker` process until the table
holds N finished rows. Reports pickup lag per tenth of the run, worker memory at start and
end, leases that expired on a healthy worker, and dead tuples.

    DATABASE_URL=... python -m bench.soak --jobs 1000000 --rate 8000

The lag of a job is ``finished_at - run_at`` (both by the database clock): its time
waiting plus running a no-op handler plus its batched outcome write. It should stay flat
while finished rows pile up, because claims only walk the small ``jobs_ready`` index.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg

import pgbeat
from bench import database
from bench.pgbeat_bench import worker_command

ROOT = Path(__file__).resolve().parents[1]

LAG_BY_TENTH = """
SELECT tenth, count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY lag),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY lag)
FROM (SELECT ntile(10) OVER (ORDER BY id) AS tenth,
             extract(epoch FROM finished_at - run_at) * 1000 AS lag
      FROM jobs WHERE status = 'done') AS finished
GROUP BY tenth ORDER BY tenth"""
DEAD_TUPLES = "SELECT n_live_tup, n_dead_tup FROM pg_stat_user_tables WHERE relname = 'jobs'"
LEFT = (
    "SELECT (SELECT count(*) FROM jobs WHERE status = 'pending')"
    " + (SELECT count(*) FROM jobs WHERE status = 'running')"
)


def produce(url: str, jobs: int, rate: float, chunk: int, stop: threading.Event) -> None:
    """Insert ``jobs`` no-op jobs at about ``rate`` per second, ``chunk`` per statement."""
    with psycopg.connect(url, autocommit=True) as conn:
        sent, started = 0, time.monotonic()
        while sent < jobs and not stop.is_set():
            size = min(chunk, jobs - sent)
            pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop") for _ in range(size)])
            sent += size
            ahead = sent / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)


def run(url: str, jobs: int, rate: float, concurrency: int) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
    command = worker_command("--concurrency", str(concurrency))
    worker = subprocess.Popen(
        command,
        env={**os.environ, "DATABASE_URL": url},
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    stop = threading.Event()
    producer = threading.Thread(target=produce, args=(url, jobs, rate, 500, stop), daemon=True)
    samples: list[dict[str, Any]] = []
    try:
        time.sleep(1.0)  # let the worker start before the clock matters
        process = psutil.Process(worker.pid)
        rss_start = process.memory_info().rss
        started = time.monotonic()
        producer.start()
        with psycopg.connect(url, autocommit=True) as conn:
            while producer.is_alive() or _scalar(conn, LEFT) > 0:
                time.sleep(2.0)
                live, dead = conn.execute(DEAD_TUPLES).fetchone() or (0, 0)
                samples.append(
                    {
                        "t": round(time.monotonic() - started, 1),
                        "live": live,
                        "dead": dead,
                        "rss_mb": process.memory_info().rss / 2**20,
                    }
                )
            elapsed = time.monotonic() - started
            rss_end = process.memory_info().rss
            lag = [
                {"tenth": t, "jobs": n, "p50_ms": round(p50, 1), "p99_ms": round(p99, 1)}
                for t, n, p50, p99 in conn.execute(LAG_BY_TENTH)
            ]
    finally:
        stop.set()
        worker.send_signal(signal.SIGTERM)
        _, errors = worker.communicate(timeout=60)
    return {
        "jobs": jobs,
        "rate_target": rate,
        "seconds": round(elapsed, 1),
        "throughput": round(jobs / elapsed),
        "rss_start_mb": round(rss_start / 2**20, 1),
        "rss_end_mb": round(rss_end / 2**20, 1),
        "leases_expired": errors.count("lease expired"),
        "lag_by_tenth": lag,
        "max_dead_tuples": max((s["dead"] for s in samples), default=0),
        "samples": samples,
    }


def _scalar(conn: psycopg.Connection[Any], query: Any) -> int:
    row = conn.execute(query).fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--rate", type=float, default=8_000.0, help="jobs enqueued per second")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    admin = database.admin_url()
    with database.fresh_database(admin, "soak") as url:
        result = run(url, args.jobs, args.rate, args.concurrency)
    summary = {k: v for k, v in result.items() if k not in ("samples", "lag_by_tenth")}
    print(json.dumps(summary))
    for row in result["lag_by_tenth"]:
        print(
            f"tenth {row['tenth']:>2}: {row['jobs']} jobs, lag p50 {row['p50_ms']} ms, "
            f"p99 {row['p99_ms']} ms"
        )
    stamp = time.strftime("%Y%m%dT%H%M%S")
    output = args.output or ROOT / "bench" / "results" / f"soak-{stamp}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2))
    print(f"written to {output}", file=sys.stderr)


if __name__ == "__main__":
    main()
