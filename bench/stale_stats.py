"""``python -m bench.stale_stats``: the drain of a burst after ANALYZE saw every job delayed.

Issue 34: no kept claim plan may sort the backlog whatever ANALYZE saw. Each run enqueues
``--jobs`` no-op jobs, delays them a day and brings them back (the burst falls due), with
ANALYZE either while they were delayed ("delayed": the claim plans the worker keeps are made
on statistics that saw no due job) or after they are back ("refreshed"), then one in-process
Worker (100 slots) drains them; each run is a child process on a fresh database
(bench/flow_bench.py's drain), the two alternated. The row is the paired ratio of the
drain's speed, delayed / refreshed (>= 0.9 is the target), with the load average beside it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from bench import database, machine
from bench.flow_bench import REPO_ROOT, run_child


def measure(src: Path, jobs: int, repeat: int) -> dict[str, Any]:
    admin = database.admin_url()
    runs: dict[str, list[float]] = {"delayed": [], "refreshed": []}
    for run in range(repeat):  # alternated, each side first every other run
        order = ["delayed", "refreshed"] if run % 2 == 0 else ["refreshed", "delayed"]
        for side in order:
            found = run_child(src, admin, "drain", jobs=jobs, keys=0, key_concurrency=None,
                              statistics=side)  # fmt: skip
            if not found["finished"]:
                raise RuntimeError(f"the {side} drain did not finish: {found}")
            runs[side].append(found["seconds"])
            print(f"{side}: {found['seconds']:.2f} s", file=sys.stderr)
    paired = [r / d for d, r in zip(runs["delayed"], runs["refreshed"], strict=True)]
    return {
        "jobs": jobs,
        "delayed_jobs_per_s": round(jobs / statistics.median(runs["delayed"])),
        "refreshed_jobs_per_s": round(jobs / statistics.median(runs["refreshed"])),
        "ratio_paired_median": round(statistics.median(paired), 3),
        "ratios_paired": [round(r, 3) for r in paired],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stale_stats", description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000, help="the burst (10,000)")
    parser.add_argument("--repeat", type=int, default=4, help="runs of each side (4)")
    parser.add_argument("--src", type=Path, default=REPO_ROOT / "src", help="pgbeat's src/")
    parser.add_argument("--output", type=Path, help="write the row as JSON here")
    args = parser.parse_args(argv)
    report = {
        "command": ["python", "-m", "bench.stale_stats", *sys.argv[1:]],
        "load_average_1m_at_start": machine.load(),
        "analyzed_while_delayed": measure(args.src, args.jobs, args.repeat),
        "load_average_1m_at_end": machine.load(),
    }
    machine.dump(report, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
