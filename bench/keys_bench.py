"""Jobs by key beside unkeyed jobs, in one run on one database: what a keyed enqueue costs,
and that the partial index ``jobs_live_key`` costs unkeyed jobs nothing.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test python -m bench.keys_bench

1. One call per transaction (autocommit), the variants interleaved in chunks so that the
   drift of commit (WAL flush) times during a run hits them all alike: unkeyed enqueue, a
   keyed insert (a new key), replace / keep_latest of a pending job, an ignore that finds
   one, a replace that supersedes a running job. Rate, p50 and p99 per call.
2. enqueue_many, 1,000 per call: unkeyed, keyed inserts, keyed replaces of pending jobs.
3. The unkeyed paths with the index and without it (dropped and rebuilt between runs, in
   turn): single enqueue and a Worker's drain of no-op jobs (median of the runs).

Writes the run to bench/results/keys-<UTC time>.json; docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

import pgbeat
from bench import database, machine
from bench.pgbeat_bench import DrainConfig, drain
from pgbeat.worker import operations
from pgbeat.worker.settings import DEFAULT_LEASE

ROOT = Path(__file__).resolve().parents[1]
LEASE = DEFAULT_LEASE  # how long a worker with default settings leases a job
KEYS = 200  # pending keyed jobs the replacing variants cycle through
CREATE_INDEX = (
    "CREATE UNIQUE INDEX jobs_live_key ON jobs (kind, job_key) "
    "WHERE job_key IS NOT NULL AND superseded_at IS NULL AND status IN ('pending', 'running')"
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def single_calls(url: str, calls: int, chunk: int) -> dict[str, dict[str, float]]:
    """Per-call latencies of each variant, interleaved chunk by chunk."""
    fresh = itertools.count()
    cycle = itertools.cycle(range(KEYS))
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.enqueue_many(
            conn, [pgbeat.NewJob("remind", {}, delay=LEASE, job_key=f"p{k}") for k in range(KEYS)]
        )
        variants: dict[str, Callable[[], Any]] = {
            "unkeyed enqueue": lambda: pgbeat.enqueue(conn, "noop", {}),
            "keyed insert (new key)": lambda: pgbeat.enqueue(
                conn, "fresh", {}, job_key=f"n{next(fresh)}"
            ),
            "replace a pending job": lambda: pgbeat.enqueue(
                conn,
                "remind",
                {"v": 1},
                delay=LEASE,
                job_key=f"p{next(cycle)}",
                on_conflict="replace",
            ),
            "keep_latest a pending job": lambda: pgbeat.enqueue(
                conn,
                "remind",
                {"v": 2},
                delay=LEASE,
                job_key=f"p{next(cycle)}",
                on_conflict="keep_latest",
            ),
            "ignore, a pending job exists": lambda: pgbeat.enqueue(
                conn, "remind", {}, job_key=f"p{next(cycle)}"
            ),
        }
        samples: dict[str, list[float]] = {name: [] for name in variants}
        samples["replace a running job (supersede + insert)"] = []
        for _ in range(0, calls, chunk):
            for name, call in variants.items():
                samples[name] += [_timed(call) for _ in range(chunk)]
            samples["replace a running job (supersede + insert)"] += _superseding(conn, chunk)
    return {name: _summary(values) for name, values in samples.items()}


def _superseding(conn: psycopg.Connection[Any], count: int) -> list[float]:
    """Replaces that find their key's job running: each claims it first (not timed)."""
    seconds = []
    for _ in range(count):
        pgbeat.enqueue(conn, "busy", {}, job_key="b", on_conflict="replace")
        operations.claim_jobs(conn, 1, LEASE, ["busy"])
        seconds.append(
            _timed(lambda: pgbeat.enqueue(conn, "busy", {}, job_key="b", on_conflict="replace"))
        )
        conn.execute("DELETE FROM jobs WHERE kind = 'busy'")
    return seconds


def _timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "calls": len(ordered),
        "per_s": round(len(ordered) / sum(ordered), 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 3),
    }


def bulk(url: str, jobs: int, batch: int) -> dict[str, float]:
    """enqueue_many rates: unkeyed, keyed inserts, keyed replaces of the same keys."""
    rates = {}
    makers: list[tuple[str, Callable[[int], pgbeat.NewJob]]] = [
        ("unkeyed", lambda i: pgbeat.NewJob("noop", {})),
        ("keyed inserts", lambda i: pgbeat.NewJob("bulk", {}, delay=LEASE, job_key=str(i))),
        (
            "keyed replaces of pending jobs",
            lambda i: pgbeat.NewJob(
                "bulk", {"v": 1}, delay=LEASE, job_key=str(i), on_conflict="replace"
            ),
        ),
    ]
    with psycopg.connect(url, autocommit=True) as conn:
        for name, make in makers:
            started = time.perf_counter()
            for start in range(0, jobs, batch):
                pgbeat.enqueue_many(conn, [make(i) for i in range(start, start + batch)])
            rates[name] = round(jobs / (time.perf_counter() - started), 1)
    return rates


def unkeyed_with_and_without_index(
    url: str, calls: int, drain_jobs: int, rounds: int
) -> dict[str, Any]:
    """Unkeyed enqueue and drain with ``jobs_live_key`` and without it, in turn."""
    runs: dict[str, dict[str, list[float]]] = {
        "with index": {"enqueue_per_s": [], "drain_per_s": []},
        "without index": {"enqueue_per_s": [], "drain_per_s": []},
    }
    config = DrainConfig(100, 100, is_async=False)
    for round_number in range(rounds):
        for variant in ("with index", "without index") if round_number % 2 == 0 else (
            "without index", "with index"
        ):  # fmt: skip
            _set_index(url, present=variant == "with index")
            database.truncate(url, "jobs")
            with psycopg.connect(url, autocommit=True) as conn:
                took = sum(_timed(lambda: pgbeat.enqueue(conn, "noop", {})) for _ in range(calls))
            runs[variant]["enqueue_per_s"].append(round(calls / took, 1))
            database.truncate(url, "jobs")
            database.vacuum_analyze(url)
            runs[variant]["drain_per_s"].append(drain(url, drain_jobs, config).value)
            log(f"  {variant}: {runs[variant]}")
    _set_index(url, present=True)
    return {
        variant: {name: {"median": statistics.median(v), "runs": v} for name, v in found.items()}
        for variant, found in runs.items()
    }


def _set_index(url: str, present: bool) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP INDEX IF EXISTS jobs_live_key")
        if present:
            conn.execute(CREATE_INDEX)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.keys_bench", description=__doc__)
    parser.add_argument("--calls", type=int, default=2000, help="single calls per variant")
    parser.add_argument("--chunk", type=int, default=100, help="calls per variant in turn")
    parser.add_argument("--bulk-jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--drain-jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=4, help="with/without index runs, each")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    admin = database.admin_url()
    started = time.monotonic()
    with database.fresh_database(admin, "keys") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            pgbeat.apply_migrations(conn)
        log("single calls")
        single = single_calls(url, args.calls, args.chunk)
        database.truncate(url, "jobs")
        log("enqueue_many")
        many = bulk(url, args.bulk_jobs, args.batch)
        log("unkeyed paths with and without jobs_live_key")
        index = unkeyed_with_and_without_index(url, args.calls, args.drain_jobs, args.rounds)
    run = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - started, 1),
        "machine": machine.facts(),
        "server": database.server_facts(admin),
        "arguments": {k: str(v) for k, v in vars(args).items()},
        "single_calls": single,
        "enqueue_many_per_s": many,
        "unkeyed_with_and_without_jobs_live_key": index,
    }
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    output = args.output or ROOT / "bench" / "results" / f"keys-{stamp}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(run, indent=2) + "\n")
    print(json.dumps({k: run[k] for k in list(run)[4:]}, indent=2))
    log(f"written to {output}")


if __name__ == "__main__":
    main()
