"""The workflow rows of ``python -m bench`` (issue 36, item 3), measured by the functions of
bench/workflow_bench.py on the database the runner gives this system.

Rows: ``enqueue_workflow`` of 1 root + N children + 1 summary in one transaction (best of
the repeats, seconds); the fan-out drained by one Worker (100 slots) against N independent
jobs, alternated (jobs/s, ratio in the table's ratio column); the N -> 1 fan-in's advance
(the summary's start after its last parent's end, median of the repeats, ms).
"""

from __future__ import annotations

import statistics

import psycopg

import pgbeat
from bench import workflow_bench
from bench.measure import (
    WORKFLOW,
    Result,
    emit,
    log,
    parse_system_arguments,
    system_arguments,
)

SYSTEM = "pgbeat_workflows"
# Pairs of the fan-out row, whatever --repeat says: a single pair's ratio swings from 0.6
# to 1.2 on a two-core machine (docs/workflows.md), so three left the median to chance.
FAN_OUT_PAIRS = 7


def rows(url: str, children: int, repeat: int) -> list[Result]:
    """The three rows, on the migrated database ``url``."""
    log(f"{SYSTEM}: enqueue_workflow of 1 + {children:,} + 1 steps")
    enqueued = workflow_bench.measure_enqueue(url, children, repeat)
    log(f"{SYSTEM}: fan-out drain against {children:,} independent jobs, alternated")
    pairs = max(repeat, FAN_OUT_PAIRS)
    fan = workflow_bench.measure_fan_out(url, children, pairs)
    shape = f"1 root + {children:,} children + 1 summary"
    return [
        Result(
            SYSTEM,
            WORKFLOW,
            "enqueue",
            round(enqueued["best_s"], 4),
            "s",
            f"enqueue_workflow, {shape}, one transaction (best of {repeat})",
            {
                "children": children,
                "steps": enqueued["steps"],
                "median_s": round(enqueued["median_s"], 4),
            },
        ),
        Result(
            SYSTEM,
            WORKFLOW,
            "fan_out_drain",
            round(fan["fan_out_jobs_per_s"], 1),
            "jobs/s",
            f"{shape}, 1 Worker x 100 slots; ratio = / {children:,} independent jobs"
            f" ({pairs} pairs, ratio of the medians)",
            {
                "children": children,
                "ratio": round(fan["ratio"], 3),
                "pair_ratios": [round(r, 3) for r in fan["pair_ratios"]],
                "independent_jobs_per_s": round(fan["independent_jobs_per_s"], 1),
            },
        ),
        Result(
            SYSTEM,
            WORKFLOW,
            "fan_in_advance",
            round(statistics.median(fan["fan_in_advance_ms"]), 2),
            "ms",
            f"{children:,} -> 1: the summary's start after its last parent's end (median)",
            {"children": children, "runs_ms": [round(v, 2) for v in fan["fan_in_advance_ms"]]},
        ),
    ]


def main() -> None:
    parser = system_arguments(__doc__ or "")
    parser.add_argument("--children", type=int, default=10_000, help="fan-out width (10,000)")
    args = parse_system_arguments(parser)
    with psycopg.connect(args.url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
    emit(rows(args.url, args.children, args.repeat))


if __name__ == "__main__":
    main()
