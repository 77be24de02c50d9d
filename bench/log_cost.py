"""What a line per job costs a worker's drain: no-op jobs drained by an in-process worker
whose job lines go to a file at INFO (``--job-logs all``) or are left out (the quiet default:
failures and a summary a minute), the two alternated in one run; prints each round's rate
and the median ratio.

    python -m bench.log_cost [--jobs 20000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psycopg

import pgbeat
from bench.database import admin_url, fresh_database
from pgbeat.db.migrate import apply_migrations
from pgbeat.observe import logs


def drain_rate(url: str, registry: pgbeat.Registry, jobs: int) -> float:
    """Jobs a second for one drain of ``jobs`` no-op jobs."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs")
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop") for _ in range(jobs)])
        settings = pgbeat.WorkerSettings(heartbeat=False, concurrency=32, claim_batch=256)
        worker = pgbeat.Worker(url, registry, settings)
        thread = threading.Thread(target=worker.run)
        started = time.monotonic()
        thread.start()
        left = "SELECT count(*) FROM jobs WHERE status <> 'done'"
        while (row := conn.execute(left).fetchone()) is not None and row[0]:
            time.sleep(0.05)
        took = time.monotonic() - started
        worker.stop()
        thread.join()
    return jobs / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    registry = pgbeat.Registry()
    registry.register("noop", lambda payload: None)
    rates: dict[str, list[float]] = {"all": [], "failures": []}
    with tempfile.TemporaryDirectory() as folder, fresh_database(admin_url(), "logs") as url:
        handler = logging.FileHandler(Path(folder) / "worker.log")
        handler.setFormatter(logging.Formatter(logs.TEXT_FORMAT))
        logging.getLogger().addHandler(handler)
        logging.getLogger().setLevel(logging.INFO)
        with psycopg.connect(url, autocommit=True) as conn:
            apply_migrations(conn)
        for mode in ["all", "failures"] * args.rounds:
            logs.job_lines(every=mode == "all")
            rates[mode].append(drain_rate(url, registry, args.jobs))
            print(f"{mode:<9} {rates[mode][-1]:,.0f} jobs/s", flush=True)
        logging.getLogger().removeHandler(handler)
        handler.close()
    ratios = [q / a for a, q in zip(rates["all"], rates["failures"], strict=True)]
    print(f"quiet / a line per job, paired rounds: {[round(r, 2) for r in ratios]}")
    print(f"median ratio {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
