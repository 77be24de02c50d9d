"""Results and the small helpers every system's benchmark shares: timing, percentiles, output.

Each system's module runs as its own process (``python -m bench.<module>``), prints its
results as one JSON array on stdout, and logs to stderr. Standard library only, so the
peers' environment can import it too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

ENQUEUE_SINGLE = "enqueue_single"
ENQUEUE_BULK = "enqueue_bulk"
DRAIN = "drain"
PICKUP = "pickup_latency"
TICK = "scheduler_tick"
WAL = "wal_per_job"  # bench/footprint.py's three
DEAD = "dead_tuples_after_drain"
SIZE = "size_per_million_jobs"
WORKFLOW = "workflow"  # bench/workflow_rows.py's three
SHAPES = "beside_shapes"  # bench/flow_rows.py's: a drain beside what it cannot take
FAIRNESS = "fairness"  # bench/flow_rows.py's: key B's start beside key A's backlog

REPEAT_BUDGET = 20.0  # seconds: no further run once the runs so far took this long (short runs)
URL_ENV = "BENCH_DATABASE_URL"  # how the runner hands a system its database (not argv: passwords)


@dataclass(frozen=True)
class Result:
    """One measured number: ``value`` in ``unit``, for one system, measurement and variant."""

    system: str
    measurement: str
    variant: str
    value: float
    unit: str
    config: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def drain_result(
    system: str,
    variant: str,
    config: str,
    jobs: int,
    seconds: float,
    processes: int,
    handled: Sequence[int] = (),
) -> Result:
    """A drain's throughput, with its process count (the report's 1-process comparison)
    and, for a multi-process drain, the jobs each process's handler ran."""
    result = rate_result(system, DRAIN, variant, config, jobs, seconds)
    result.detail["processes"] = processes
    if handled:
        result.detail["handled_per_process"] = list(handled)
    return result


def rate_result(
    system: str, measurement: str, variant: str, config: str, jobs: int, seconds: float
) -> Result:
    """A throughput result: ``jobs`` in ``seconds`` as jobs per second."""
    return Result(
        system,
        measurement,
        variant,
        round(jobs / seconds, 1),
        "jobs/s",
        config,
        {"jobs": jobs, "seconds": round(seconds, 4)},
    )


def should_repeat(runs: Sequence[Result], times: int, budget: float = REPEAT_BUDGET) -> bool:
    """Whether to run again: fewer than ``times`` runs and under ``budget`` seconds so far."""
    spent = sum(float(r.detail.get("seconds", 0.0)) for r in runs)
    return not runs or (len(runs) < times and spent < budget)


def best_run(run: Callable[[], Result], times: int) -> Result:
    """Run ``run`` up to ``times`` times (within the repeat budget); keep the fastest."""
    return best_of(_runs(run, times))


async def best_run_async(run: Callable[[], Awaitable[Result]], times: int) -> Result:
    """``best_run`` for a coroutine function."""
    return best_of(await _runs_async(run, times))


def median_run(run: Callable[[], Result], times: int) -> Result:
    """Run ``run`` up to ``times`` times (within the repeat budget); report the median."""
    return median_of(_runs(run, times))


async def median_run_async(run: Callable[[], Awaitable[Result]], times: int) -> Result:
    """``median_run`` for a coroutine function."""
    return median_of(await _runs_async(run, times))


def _runs(run: Callable[[], Result], times: int) -> list[Result]:
    runs: list[Result] = []
    while should_repeat(runs, times):
        runs.append(run())
    return runs


async def _runs_async(run: Callable[[], Awaitable[Result]], times: int) -> list[Result]:
    runs: list[Result] = []
    while should_repeat(runs, times):
        runs.append(await run())
    return runs


def best_of(runs: Sequence[Result]) -> Result:
    """The fastest of repeated runs of one configuration, with every run's value kept."""
    fastest = max(runs, key=lambda r: r.value)
    detail = {**fastest.detail, "runs": [r.value for r in runs], "kept": "best"}
    return replace(fastest, detail=detail)


def median_of(runs: Sequence[Result]) -> Result:
    """The median of repeated runs of one configuration (of a rate: higher is better).

    ``value`` is the median (the mean of the middle two for an even count); ``detail``
    keeps every run's value, the best, and the seconds the median rate stands for.
    """
    values = [r.value for r in runs]
    median = round(statistics.median(values), 1)
    first = runs[0]
    detail = {**first.detail, "runs": values, "best": max(values), "kept": "median"}
    jobs = first.detail.get("jobs")
    if jobs and median:
        detail["seconds"] = round(jobs / median, 4)
    paired = [r.detail["paired_ratio"] for r in runs if "paired_ratio" in r.detail]
    if paired:  # runs paired with a baseline run each: the median of the pairs' ratios
        detail["paired_ratios"] = paired
        detail["paired_ratio"] = round(statistics.median(paired), 3)
        detail["paired_raw_jobs_per_s"] = round(
            statistics.median(r.detail["paired_raw_jobs_per_s"] for r in runs), 1
        )
    return replace(first, value=median, detail=detail)


def latency_result(system: str, variant: str, config: str, samples: Sequence[float]) -> Result:
    """Pickup latency: ``samples`` in seconds, reported as p50 (``value``) and p99, in ms."""
    millis = sorted(s * 1000 for s in samples)
    return Result(
        system,
        PICKUP,
        variant,
        round(percentile(millis, 50), 3),
        "ms p50",
        config,
        {
            "p50_ms": round(percentile(millis, 50), 3),
            "p99_ms": round(percentile(millis, 99), 3),
            "mean_ms": round(statistics.fmean(millis), 3),
            "max_ms": round(millis[-1], 3),
            "samples": len(millis),
        },
    )


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile of sorted ``ordered`` by linear interpolation between ranks."""
    if not ordered:
        raise ValueError("no samples")
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class Stopwatch:
    """``with Stopwatch() as watch: ...`` then ``watch.seconds`` (monotonic clock)."""

    def __init__(self) -> None:
        self.started = 0.0
        self.seconds = 0.0

    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        self.seconds = time.perf_counter() - self.started


def system_arguments(description: str) -> argparse.ArgumentParser:
    """The flags every system's module takes; the runner passes the same values to all."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--url", default=os.environ.get(URL_ENV), help=f"database (${URL_ENV})")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per drain")
    parser.add_argument("--enqueue-jobs", type=int, default=5_000, help="single enqueues")
    parser.add_argument("--bulk-jobs", type=int, default=20_000, help="jobs enqueued in bulk")
    parser.add_argument("--batch", type=int, default=1_000, help="jobs per bulk statement")
    parser.add_argument("--latency-samples", type=int, default=50)
    parser.add_argument("--latency-gap", type=float, default=0.1, help="seconds between samples")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of each drain (median kept) and bulk enqueue (best kept)",
    )
    parser.add_argument("--quick-drain", action="store_true", help="measure one drain config only")
    parser.add_argument(
        "--footprint-jobs", type=int, default=10_000, help="jobs of the WAL/bloat measurement"
    )
    parser.add_argument(
        "--footprint-only", action="store_true", help="only the WAL/bloat measurement"
    )
    return parser


def parse_system_arguments(parser: argparse.ArgumentParser) -> argparse.Namespace:
    args = parser.parse_args()
    if not args.url:
        parser.error(f"give --url or set {URL_ENV}")
    return args


def emit(results: Sequence[Result]) -> None:
    """Print the results as one JSON array on stdout (the runner reads the last line)."""
    sys.stdout.write(json.dumps([r.as_dict() for r in results]) + "\n")
    sys.stdout.flush()


def log(message: str) -> None:
    """Progress for the person watching, on stderr."""
    print(f"  {message}", file=sys.stderr, flush=True)
