"""``python -m bench``: pgbeat, its peers and raw SQL, measured on one PostgreSQL in one run.

Prints a table with each result's ratio to the raw-SQL baseline and writes the run to
``bench/results/<UTC timestamp>.json``. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import database, machine, peers_env, report
from bench.flow_bench import SHAPES
from bench.runner import SYSTEMS, System, SystemFailed, run_system

# The amounts of a full run, of --quick and of --smoke; any flag given overrides its value.
PROFILES: dict[str, dict[str, Any]] = {
    "full": {
        "jobs": 20_000,
        "enqueue_jobs": 5_000,
        "bulk_jobs": 50_000,
        "batch": 1_000,
        "latency_samples": 50,
        "schedules": "1000,10000",
        "repeat": 3,
        "quick_drain": False,
        "footprint_jobs": 10_000,
        "workflow_children": 10_000,
        "shapes": ",".join(SHAPES),
        "fair_backlog": 20_000,
        "fair_samples": 200,
    },
    "quick": {
        "jobs": 5_000,
        "enqueue_jobs": 1_000,
        "bulk_jobs": 10_000,
        "batch": 1_000,
        "latency_samples": 20,
        "schedules": "1000",
        "repeat": 1,
        "quick_drain": True,
        "footprint_jobs": 2_000,
        "workflow_children": 10_000,
        "shapes": ",".join(SHAPES),
        "fair_backlog": 5_000,
        "fair_samples": 100,
    },
    "smoke": {
        "jobs": 300,
        "enqueue_jobs": 200,
        "bulk_jobs": 500,
        "batch": 100,
        "latency_samples": 5,
        "schedules": "100",
        "repeat": 1,
        "quick_drain": True,
        "footprint_jobs": 300,
        "workflow_children": 100,
        "shapes": "limited_empty_20",
        "fair_backlog": 300,
        "fair_samples": 10,
    },
}
SYSTEM_TIMEOUT = 600.0
# pgbeat_flow runs 15 children, each on a database of its own, some planting 200,000 rows:
# 6 to 7 minutes of a --quick run at load 20.
SYSTEM_TIMEOUTS = {"pgbeat_flow": 1800.0}


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="smaller counts, one drain config")
    mode.add_argument(
        "--smoke", action="store_true", help="a few hundred jobs, pgbeat and raw SQL only"
    )
    parser.add_argument("--jobs", type=int, help="no-op jobs per drain (20,000)")
    parser.add_argument("--enqueue-jobs", type=int, help="jobs enqueued one by one (5,000)")
    parser.add_argument("--bulk-jobs", type=int, help="jobs enqueued in bulk (50,000)")
    parser.add_argument("--batch", type=int, help="jobs per bulk statement (1,000)")
    parser.add_argument("--latency-samples", type=int, help="pickup samples (50)")
    parser.add_argument("--schedules", help="scheduler sizes, comma-separated (1000,10000)")
    parser.add_argument(
        "--repeat", type=int, help="runs of each drain (median kept) and bulk enqueue (best) (3)"
    )
    parser.add_argument(
        "--footprint-jobs", type=int, help="jobs of the WAL/dead tuples/size measurement (10,000)"
    )
    parser.add_argument(
        "--footprint-only",
        action="store_true",
        help="only WAL, dead tuples and size per job, of pgbeat and the peers",
    )
    parser.add_argument(
        "--workflow-children", type=int, help="steps of the workflow rows' fan-out (10,000)"
    )
    parser.add_argument("--shapes", help="the flow rows' shapes, comma-separated (all)")
    parser.add_argument("--fair-backlog", type=int, help="key A's jobs, fairness rows (20,000)")
    parser.add_argument("--fair-samples", type=int, help="key B's jobs, fairness rows (200)")
    parser.add_argument("--no-peers", action="store_true", help="skip procrastinate, pgqueuer")
    parser.add_argument(
        "--only", help="comma-separated systems: " + ",".join(s.key for s in SYSTEMS)
    )
    parser.add_argument("--output", type=Path, help="JSON file (bench/results/<time>.json)")
    args = parser.parse_args(argv)
    profile = PROFILES["smoke" if args.smoke else "quick" if args.quick else "full"]
    for name, value in profile.items():
        if getattr(args, name, None) is None:
            setattr(args, name, value)
    return args


def child_arguments(args: argparse.Namespace) -> list[str]:
    """The flags every system's module gets, so all measure the same amounts."""
    flags = [
        "--jobs", str(args.jobs),
        "--enqueue-jobs", str(args.enqueue_jobs),
        "--bulk-jobs", str(args.bulk_jobs),
        "--batch", str(args.batch),
        "--latency-samples", str(args.latency_samples),
        "--repeat", str(args.repeat),
        "--footprint-jobs", str(args.footprint_jobs),
    ]  # fmt: skip
    if args.footprint_only:
        flags.append("--footprint-only")
    return [*flags, "--quick-drain"] if args.quick_drain else flags


def chosen_systems(args: argparse.Namespace) -> list[System]:
    only = set(args.only.split(",")) if args.only else None
    unknown = (only or set()) - {s.key for s in SYSTEMS}
    if unknown:
        raise SystemExit(f"bench: unknown systems {', '.join(sorted(unknown))}")
    peers_wanted = not (args.smoke or args.no_peers)
    return [
        s
        for s in SYSTEMS
        if (only is None or s.key in only)
        and (peers_wanted or not s.is_peer or only)
        and (s.key in FOOTPRINT_SYSTEMS or not args.footprint_only)
        and (only or not args.smoke or s.key not in EXTENDED_SYSTEMS)
    ]


def system_flags(system: System, args: argparse.Namespace) -> list[str]:
    """The flags of one system's own sizes, beside child_arguments'."""
    flags = {
        "pgbeat_scheduler": ["--schedules", args.schedules],
        "pgbeat_workflows": ["--children", str(args.workflow_children)],
        "pgbeat_flow": [
            "--shapes", args.shapes,
            "--fair-backlog", str(args.fair_backlog),
            "--fair-samples", str(args.fair_samples),
        ],
    }  # fmt: skip
    return flags.get(system.key, [])


# Systems that --smoke leaves out unless --only names them (a minute of their own).
EXTENDED_SYSTEMS = {"pgbeat_workflows", "pgbeat_flow"}
FOOTPRINT_SYSTEMS = {"pgbeat", "procrastinate", "pgqueuer_asyncpg"}  # what --footprint-only runs


def peer_python(systems: list[System]) -> tuple[Path | None, str, dict[str, str]]:
    """The peers' python if any peer is wanted (installing it if needed), why, versions."""
    if not any(s.is_peer for s in systems):
        return None, "not requested", {}
    python, status = peers_env.ensure()
    return python, status, peers_env.versions(python) if python else {}


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    started, clock = datetime.now(UTC), time.monotonic()
    try:
        admin = database.admin_url()
        server = database.server_facts(admin)
    except Exception as exc:
        print(f"bench: no database: {exc}", file=sys.stderr)
        return 1
    load_at_start = machine.load()
    if load_at_start > machine.BUSY_LOAD:
        print(
            f"bench: warning: load average {load_at_start} before the run; something else is "
            "using the CPU and will skew the numbers",
            file=sys.stderr,
        )
    systems = chosen_systems(args)
    python, peer_status, versions = peer_python(systems)
    results: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    for system in systems:
        if system.is_peer and python is None:
            skipped.append({"system": system.key, "reason": peer_status})
            continue
        extra = system_flags(system, args)
        try:
            results += run_system(
                system,
                python if system.is_peer and python else sys.executable,
                admin,
                child_arguments(args) + extra,
                SYSTEM_TIMEOUTS.get(system.key, SYSTEM_TIMEOUT),
            )
        except SystemFailed as exc:
            skipped.append({"system": system.key, "reason": str(exc)})
    print(report.table(results, skipped))
    document = {
        "started_at": started.isoformat(),
        "seconds": round(time.monotonic() - clock, 1),
        "command": ["python", "-m", "bench", *(sys.argv[1:] if argv is None else argv)],
        "settings": {k: v for k, v in vars(args).items() if k != "output"},
        "pgbeat_revision": machine.source_revision(peers_env.REPO_ROOT),
        "machine": {**machine.facts(), "load_average_1m_at_start": load_at_start},
        "server": server,
        "peers": {"status": peer_status, "versions": versions},
        "results": results,
        "skipped": skipped,
    }
    path = report.write_json(document, args.output)
    print(f"\nresults written to {path} ({document['seconds']:.0f}s)")
    return 0 if results and not any(s["system"] in _OWN for s in skipped) else 1


_OWN = {"raw_sql", "pgbeat", "pgbeat_scheduler"}  # a failure of these fails the run


if __name__ == "__main__":
    sys.exit(main())
