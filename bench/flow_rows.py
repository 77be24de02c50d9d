"""The flow-control rows of ``python -m bench`` (issue 34, item 8), measured by the
functions of bench/flow_bench.py, each child on a fresh database of its own.

Rows: one worker (10 slots) draining ``--jobs`` default-queue jobs beside each shape of
issue 34's table (``flow_bench.SHAPES``: what the worker cannot take), against the same
drain alone, in ``--repeat`` pairs (jobs/s beside; the ratio column is the median of the
pairs' beside / alone); and key B's
start (one job every 20 ms) beside key A's backlog in a queue of concurrency 50, with the
queue otherwise empty, without ``fair`` and with it (p50/p99 ms, one worker x 50 slots).
"""

from __future__ import annotations

import argparse

from bench import database, flow_bench
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


def fairness_rows(admin: str, backlog: int, samples: int) -> list[Result]:
    """Key B's start beside key A's ``backlog``: none, not fair, fair."""
    rows = []
    for name, size, fair in (
        ("empty", 0, True),
        ("not_fair", backlog, False),
        ("fair", backlog, True),
    ):
        log(f"{SYSTEM}: fairness, {name} (A's backlog {size:,})")
        waits = flow_bench.run_child(
            SRC, admin, "fairness", backlog=size, samples=samples, fair=fair
        )["waits"]
        millis = sorted(1000 * w for w in waits)
        p50, p99 = round(percentile(millis, 50), 1), round(percentile(millis, 99), 1)
        config = f"B's start, 1 every 20 ms, beside A's {size:,} due 20 ms jobs; 1 Worker x 50"
        detail = {
            "backlog": size,
            "fair": fair,
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
