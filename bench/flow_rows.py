"""The flow-control rows of ``python -m bench`` (issue 34, item 8), measured by the
functions of bench/flow_bench.py, each child on a fresh database of its own.

Rows: one worker (10 slots) draining ``--jobs`` default-queue jobs beside each shape of
issue 34's table (``flow_bench.SHAPES``: what the worker cannot take), against the same
drain alone, in ``--repeat`` pairs (jobs/s beside; the ratio column is the median of the
pairs' beside / alone); and key B's
start (one job every 20 ms) beside key A's backlog in a queue of concurrency 50, with the
queue otherwise empty, without ``fair`` and with it (p50/p99 ms; 4 worker processes x 50
slots, issue 34's shape, and one worker x 50: FAIRNESS_RUNS).
"""

from __future__ import annotations

import argparse

from bench import database, flow_bench, tenant_bench
from bench.measure import (
    FAIRNESS,
    SHAPES,
    Result,
    emit,
    log,
    parse_system_arguments,
    percentile,
    system_arguments,
)

SYSTEM = "pgbeat_flow"
SRC = flow_bench.REPO_ROOT / "src"  # the children import this checkout's pgbeat


def shape_rows(admin: str, jobs: int, shapes: str, repeat: int) -> list[Result]:
    """Each shape's drain beside it against alone, the median ratio of ``repeat`` pairs (a
    drain stops at 8 s). One pair each read 0.73-0.99 for shapes that read 0.93 in four
    pairs minutes later: a target on the worst of six single pairs was a coin toss."""
    log(f"{SYSTEM}: drains of {jobs:,} jobs beside {shapes}, {repeat} pairs each")
    given = argparse.Namespace(jobs=jobs, repeat=repeat, shapes=shapes, base_src=None)
    found = flow_bench.measure_shapes(given, admin, SRC)
    config = (
        f"1 Worker x 10 slots, {jobs:,} default-queue jobs; "
        f"ratio = beside / alone, median of {repeat} pairs"
    )
    return [
        Result(
            SYSTEM,
            SHAPES,
            shape,
            float(row["this"]["beside_jobs_per_s"]),
            "jobs/s",
            config,
            {
                "jobs": jobs,
                "ratio": row["this"]["paired_ratio_median"],
                "alone_jobs_per_s": row["this"]["alone_jobs_per_s"],
            },
        )
        for shape, row in found.items()
    ]


# The fairness rows: (variant, A's backlog or 0, fair, worker processes). The first three
# are issue 34's shape (concurrency 50 over 4 worker processes x 50 slots; B's wait is its
# claim's started_at less its created_at, the database's clock); the last two are one
# worker x 50 slots, timed from B's enqueue to its handler's start (the rows of the runs
# before 2026-12-08, kept to compare with them).
FAIRNESS_RUNS: tuple[tuple[str, bool, bool, int], ...] = (
    ("empty", False, True, 4),
    ("not_fair", True, False, 4),
    ("fair", True, True, 4),
    ("empty_one_worker", False, True, 1),
    ("fair_one_worker", True, True, 1),
)


def fairness_rows(admin: str, backlog: int, samples: int) -> list[Result]:
    """Key B's start beside key A's ``backlog``: none, not fair, fair (FAIRNESS_RUNS)."""
    rows = []
    for name, behind, fair, processes in FAIRNESS_RUNS:
        size = backlog if behind else 0
        log(f"{SYSTEM}: fairness, {name} (A's backlog {size:,}, {processes} x 50 slots)")
        if processes == 1:
            waits = flow_bench.run_child(
                SRC, admin, "fairness", backlog=size, samples=samples, fair=fair
            )["waits"]
        else:
            waits = tenant_bench.run_child(
                SRC, admin, "fairness", backlog=size, samples=samples, fair=fair,
                processes=processes,
            )["waits"]  # fmt: skip
        millis = sorted(1000 * w for w in waits)
        p50, p99 = round(percentile(millis, 50), 1), round(percentile(millis, 99), 1)
        config = (
            f"B's start, 1 every 20 ms, beside A's {size:,} due 20 ms jobs; "
            f"{processes} Worker{'s' if processes > 1 else ''} x 50"
        )
        detail = {
            "backlog": size,
            "fair": fair,
            "processes": processes,
            "samples": len(millis),
            "p50_ms": p50,
            "p99_ms": p99,
        }
        rows.append(Result(SYSTEM, FAIRNESS, name, p50, "ms p50", config, detail))
    return rows


def main() -> None:
    parser = system_arguments(__doc__ or "")
    parser.add_argument("--shapes", default=",".join(flow_bench.SHAPES), help="shapes to run")
    parser.add_argument("--fair-backlog", type=int, default=20_000, help="A's jobs (20,000)")
    parser.add_argument("--fair-samples", type=int, default=200, help="B's jobs (200)")
    args = parse_system_arguments(parser)
    admin = database.admin_url()  # each child creates its own database there
    rows = shape_rows(admin, args.jobs, args.shapes, args.repeat) if args.shapes else []
    emit(rows + fairness_rows(admin, args.fair_backlog, args.fair_samples))


if __name__ == "__main__":
    main()
