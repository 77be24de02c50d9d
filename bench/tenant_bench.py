"""``python -m bench.tenant_bench``: flow control at tenant scale (issue 34), with 1 or more
worker processes, each measurement in a child process on a fresh database.

Rows: ``shapes``, the drain of 20,000 default-queue jobs beside each of bench.flow_bench's
SHAPES against the same drain alone, alternated (jobs/s over at most 8 s); ``keys``, a
drain over 20,000 limit keys with ``key_concurrency = 1`` and with ``key_rate = 1/1h`` (every
key free: one job each) against the same jobs unlimited (and, with ``--base-src``, the
same drains of another revision); ``fair_drain``, 20,000 no-op jobs over 4 keys of a fair
queue (concurrency 50) against --base-src; ``fair``, key B's start (the claim's
``started_at`` less the job's ``created_at``, p50/p99 of 200) with key A's backlog enqueued
first, in a queue of concurrency 50, fair or not, and with the queue otherwise empty.
docs/flow-control.md quotes them.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

import psycopg

import pgbeat  # children: the revision their PYTHONPATH puts first
from bench import database, machine
from bench.flow_bench import (
    SHAPES,
    enqueue_noops,
    percentile,
    plant_fairness,
    plant_shape,
    shape_rows,
)
from bench.report import save_report

REPO_ROOT = Path(__file__).resolve().parents[1]
CHILD_TIMEOUT = 900.0
SHAPE_SECONDS = 8.0


def _serve(url: str, slots: int, done: Synchronized[int], stop: Any, sleep: float) -> None:
    """One worker process: handlers for the no-op drain (``noop``) and fairness (``a``,
    ``b``: ``sleep`` seconds each), counting what it ran into ``done``, until ``stop``."""
    registry = pgbeat.Registry()

    def run(payload: Any) -> None:
        if sleep:
            time.sleep(sleep)
        with done.get_lock():
            done.value += 1

    for kind in ("noop", "a", "b"):
        registry.handler(kind)(run)
    run_until(pgbeat.Worker(url, registry, worker_settings(slots)), stop)


def worker_settings(slots: int) -> pgbeat.WorkerSettings:
    """A bench worker's settings: ``slots`` slots, claims as large, no heartbeat."""
    return pgbeat.WorkerSettings(concurrency=slots, claim_batch=slots, heartbeat=False)


def run_until(worker: pgbeat.Worker, stop: Any) -> None:
    """Run ``worker`` on a thread until ``stop`` (an event) is set, then stop it; a worker
    that ended before (its loop raised) ends the process with an error, so the measuring
    parent sees it at once instead of waiting out its deadline."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    while not stop.wait(0.2):
        if not thread.is_alive():
            raise SystemExit("the bench's worker stopped before it was told to")
    worker.stop()
    thread.join(60)


@dataclass
class Fleet:
    """Running worker processes: the shared count of jobs they ran, and whether all live."""

    done: Synchronized[int]
    children: list[Any]

    def alive(self) -> bool:
        return all(child.is_alive() for child in self.children)


@contextmanager
def fleet(url: str, processes: int, slots: int, sleep: float = 0.0) -> Iterator[Fleet]:
    """``processes`` worker processes (forked: no interpreter start-up), stopped on exit."""
    context = multiprocessing.get_context("fork")
    done = context.Value("q", 0)
    stop = context.Event()
    children = [
        context.Process(target=_serve, args=(url, slots, done, stop, sleep))
        for _ in range(processes)
    ]
    for child in children:
        child.start()
    try:
        yield Fleet(done, children)
    finally:
        stop.set()
        for child in children:
            child.join(60)
            if child.is_alive():
                child.kill()


def child_drain(
    url: str,
    jobs: int,
    processes: int,
    slots: int = 10,
    beside: str = "",
    keys: int = 0,
    key_concurrency: int | None = None,
    key_rate: str | None = None,
    max_seconds: float = CHILD_TIMEOUT,
    fair_concurrency: int | None = None,
) -> dict[str, Any]:
    """Jobs/s of ``processes`` workers x ``slots`` draining ``jobs`` no-op jobs (over
    ``keys`` limit keys of queue "keyed" if any, fair with ``fair_concurrency`` if given),
    with ``beside`` (one of SHAPES) planted."""
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        if beside:
            plant_shape(conn, beside)
        enqueue_noops(conn, jobs, keys, False)
        if key_concurrency is not None:
            pgbeat.configure_queue(conn, "keyed", key_concurrency=key_concurrency)
        if key_rate is not None:
            pgbeat.configure_queue(conn, "keyed", key_rate=key_rate)
        if fair_concurrency is not None:
            pgbeat.configure_queue(conn, "keyed", fair=True, concurrency=fair_concurrency)
        conn.execute("VACUUM ANALYZE jobs")
    with fleet(url, processes, slots) as running:
        started = time.perf_counter()
        while running.done.value < jobs and time.perf_counter() - started < max_seconds:
            if not running.alive():
                raise RuntimeError("a worker process of the drain ended before it")
            time.sleep(0.005)
        seconds, ran = time.perf_counter() - started, running.done.value
    return {"seconds": seconds, "ran": ran, "jobs_per_s": ran / seconds, "done": ran >= jobs}


def child_fairness(
    url: str, backlog: int, samples: int, fair: bool, processes: int
) -> dict[str, Any]:
    """Key B's waits (claim's started_at less created_at, database clock), one B job every
    20 ms, in queue "tenants" (concurrency 50) behind key A's ``backlog`` of 20 ms jobs."""
    with psycopg.connect(url, autocommit=True) as conn:
        plant_fairness(conn, backlog, fair)
        with fleet(url, processes, 50, sleep=0.02):
            time.sleep(1.0)
            a_before, sampling = _a_started(conn), time.monotonic()
            for _ in range(samples):
                pgbeat.enqueue(conn, "b", queue="tenants", limit_key="B")
                time.sleep(0.02)
            deadline = time.monotonic() + 120
            query = "SELECT count(*) FROM jobs WHERE kind = 'b' AND started_at IS NOT NULL"
            while time.monotonic() < deadline:
                row = conn.execute(query).fetchone()
                if row is not None and row[0] >= samples:
                    break
                time.sleep(0.05)
            a_per_s = (_a_started(conn) - a_before) / (time.monotonic() - sampling)
        waits = conn.execute(
            "SELECT extract(epoch FROM coalesce(started_at, now()) - created_at)::float8"
            " FROM jobs WHERE kind = 'b'"
        ).fetchall()
    return {"waits": [w for (w,) in waits], "a_per_s": a_per_s}


def _a_started(conn: psycopg.Connection[Any]) -> int:
    """How many of key A's jobs have started (A's share of the slots, while B samples)."""
    found = conn.execute(
        "SELECT count(*) FROM jobs WHERE kind = 'a' AND started_at IS NOT NULL"
    ).fetchone()
    return int(found[0]) if found is not None else 0


def child_enqueue(url: str, jobs: int, singles: int) -> dict[str, Any]:
    """Seconds to enqueue ``jobs`` jobs 1,000 a statement, and ``singles`` one a
    transaction: what every pending job's index entries cost the enqueue."""
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        started = time.perf_counter()
        enqueue_noops(conn, jobs, 0, False)
        batched = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(singles):
            pgbeat.enqueue(conn, "noop")
        single = time.perf_counter() - started
    return {"batched_s": batched, "single_s": single}


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "enqueue": child_enqueue,
    "drain": child_drain,
    "fairness": child_fairness,
}


def run_child(src: Path, admin: str, mode: str, **kwargs: Any) -> dict[str, Any]:
    """One child on a fresh database, importing pgbeat from ``src``."""
    with database.fresh_database(admin, f"tenant_{mode}") as url:
        command = [sys.executable, "-m", "bench.tenant_bench", "--child", mode, "--url", url]
        command += ["--kwargs", json.dumps(kwargs)]
        done = subprocess.run(
            command, env=machine.revision_env(src), cwd=REPO_ROOT, capture_output=True,
            text=True, timeout=CHILD_TIMEOUT, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{mode} child failed: {done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def measure_shapes(args: argparse.Namespace, admin: str) -> dict[str, Any]:
    """Each shape: the drain beside it against the drain alone, alternated, per revision."""
    sources = [("this", args.src)] + ([("base", args.base_src)] if args.base_src else [])
    drain = {"jobs": args.jobs, "processes": args.processes, "max_seconds": SHAPE_SECONDS}

    def one(src: Path, beside: str) -> float:
        return float(run_child(src, admin, "drain", **drain, beside=beside)["jobs_per_s"])

    return shape_rows(args.shapes, sources, args.repeat, one)


def measure_keys(args: argparse.Namespace, admin: str) -> dict[str, Any]:
    """20,000 jobs over 20,000 keys: unlimited, key_concurrency = 1, key_rate = 1/1h (every
    key free), alternated; the same three drains of --base-src too if given."""
    keyed = {"jobs": args.jobs, "processes": args.processes, "keys": args.keys, "slots": 100}
    variants: dict[str, tuple[Path, dict[str, Any]]] = {
        "unlimited": (args.src, keyed),
        "key_concurrency_1": (args.src, {**keyed, "key_concurrency": 1}),
        "key_rate_1_per_1h": (args.src, {**keyed, "key_rate": "1/1h"}),
    }
    if args.base_src:
        variants["base_unlimited"] = (args.base_src, keyed)
        variants["base_key_concurrency_1"] = (args.base_src, {**keyed, "key_concurrency": 1})
        variants["base_key_rate_1_per_1h"] = (args.base_src, {**keyed, "key_rate": "1/1h"})
    runs: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeat):
        for name, (src, kwargs) in variants.items():
            runs[name].append(run_child(src, admin, "drain", **kwargs)["seconds"])
            print(f"keys {name}: {runs[name][-1]:.2f}s", file=sys.stderr)
    found: dict[str, Any] = {"jobs": args.jobs, "keys": args.keys, "runs_s": runs}
    for name in variants:
        if name.endswith("unlimited"):
            continue
        free = runs["base_unlimited" if name.startswith("base_") else "unlimited"]
        ratios = [f / k for f, k in zip(free, runs[name], strict=True)]
        found[f"{name}_of_unlimited"] = round(statistics.median(ratios), 3)
    return found


def measure_fair_drain(args: argparse.Namespace, admin: str) -> dict[str, Any]:
    """Short jobs in a fair queue, where the claims under its row lock set the pace: 20,000
    no-op jobs over 4 keys, concurrency 50, ``processes`` x 50 slots, against --base-src
    (needs it), alternated; jobs/s and the paired ratios this / base."""
    drain = {"jobs": args.jobs, "processes": args.processes, "keys": 4, "slots": 50}
    drain["fair_concurrency"] = 50
    runs: dict[str, list[float]] = {"this": [], "base": []}
    for _ in range(args.repeat):
        for side, src in (("base", args.base_src), ("this", args.src)):
            runs[side].append(run_child(src, admin, "drain", **drain)["jobs_per_s"])
            print(f"fair_drain {side}: {runs[side][-1]:.0f} jobs/s", file=sys.stderr)
    ratios = [t / b for t, b in zip(runs["this"], runs["base"], strict=True)]
    return {**drain, "jobs_per_s": runs, "this_over_base": round(statistics.median(ratios), 3)}


def measure_enqueue(args: argparse.Namespace, admin: str) -> dict[str, Any]:
    """The enqueue's cost against --base-src (needs it), alternated, paired ratios."""
    runs: dict[str, list[dict[str, float]]] = {"this": [], "base": []}
    for _ in range(max(3, args.repeat)):
        for side, src in (("base", args.base_src), ("this", args.src)):
            runs[side].append(run_child(src, admin, "enqueue", jobs=args.jobs, singles=2_000))
            print(f"enqueue {side}: {runs[side][-1]}", file=sys.stderr)
    found: dict[str, Any] = {"jobs": args.jobs, "singles": 2_000, "runs": runs}
    for key in ("batched_s", "single_s"):
        ratios = [t[key] / b[key] for t, b in zip(runs["this"], runs["base"], strict=True)]
        found[f"{key}_this_over_base"] = round(statistics.median(ratios), 3)
    return found


def measure_fairness(args: argparse.Namespace, admin: str) -> dict[str, Any]:
    """Key B's start p50/p99 behind A's backlog, fair or not, and with the queue empty; each
    of --base-src too (``base_`` rows), alternated, --repeat times (``_runs``: each run's)."""
    found: dict[str, Any] = {"processes": args.processes}
    modes = (("empty", 0, True), ("not_fair", args.backlog, False), ("fair", args.backlog, True))
    sources = [("", args.src)] + ([("base_", args.base_src)] if args.base_src else [])
    waits: dict[str, list[list[float]]] = {}
    a_rates: dict[str, list[int]] = {}  # A's jobs started per second while B sampled
    for _ in range(args.repeat):
        for name, backlog, fair in modes:
            if name == "not_fair" and not args.not_fair:
                continue
            for prefix, src in sources:
                result = run_child(
                    src, admin, "fairness", backlog=backlog, samples=200, fair=fair,
                    processes=args.processes,
                )  # fmt: skip
                waits.setdefault(prefix + name, []).append(result["waits"])
                a_rates.setdefault(prefix + name, []).append(round(result["a_per_s"]))
                print(f"fair {prefix}{name}: {_starts(result['waits'])}", file=sys.stderr)
    for name, runs in waits.items():
        found[name] = {
            **_starts([w for run in runs for w in run]),
            "runs": [_starts(r) for r in runs],
            "a_started_per_s": a_rates[name],
        }
    return found


def _starts(waits: list[float]) -> dict[str, Any]:
    """B's start p50/p99 in milliseconds, and how many."""
    return {
        "b_start_p50_ms": round(1000 * percentile(waits, 0.5), 1),
        "b_start_p99_ms": round(1000 * percentile(waits, 0.99), 1),
        "samples": len(waits),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tenant_bench", description=__doc__)
    parser.add_argument("--child", choices=sorted(CHILDREN))
    parser.add_argument("--url")
    parser.add_argument("--kwargs", default="{}")
    parser.add_argument("--src", type=Path, default=REPO_ROOT / "src", help="this revision's")
    parser.add_argument("--base-src", type=Path, help="another revision's src/ to compare")
    parser.add_argument("--only", default="shapes,keys,fair")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--backlog", type=int, default=100_000, help="key A's, for fair")
    parser.add_argument("--not-fair", action="store_true", help="the fair row's baseline too")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(CHILDREN[args.child](args.url, **json.loads(args.kwargs))))
        return 0
    admin = database.admin_url()
    only = set(args.only.split(","))
    report: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(),
        "command": ["python", "-m", "bench.tenant_bench", *sys.argv[1:]],
        "revision": machine.source_revision(REPO_ROOT),
        "load_average_1m_at_start": machine.load(),
    }
    if "shapes" in only:
        report["beside_shapes"] = measure_shapes(args, admin)
    if "keys" in only:
        report["keys"] = measure_keys(args, admin)
    if "fair" in only:
        report["fairness"] = measure_fairness(args, admin)
    if "fair_drain" in only and args.base_src:
        report["fair_drain"] = measure_fair_drain(args, admin)
    if "enqueue" in only and args.base_src:
        report["enqueue"] = measure_enqueue(args, admin)
    report["load_average_1m_at_end"] = machine.load()
    save_report(report, "tenant", args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
