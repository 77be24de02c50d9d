"""``python -m tests.chaos --long``: the chaos scenarios at full size, a table and a JSON file.

Everything runs on this machine: the database must be on loopback or a unix socket
(``--database-url``, else ``DATABASE_URL``, else a private embedded server), and the
database-restart scenario always uses a private embedded server of its own, the network
partitions one in network namespaces (root and ``ip netns``; skipped, saying so, without
them), the failovers two clusters of their own (tests/chaos/clusters.py). Exit status 1
when any scenario saw a promise broken. See docs/reliability.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.machine import source_revision

from tests.chaos.clusters import unavailable_reason as clusters_unavailable
from tests.chaos.failover import Failover, failover
from tests.chaos.harness import (
    ROOT,
    PrivateServer,
    ScenarioResult,
    connect,
    fresh_database,
    require_loopback,
)
from tests.chaos.netns import unavailable_reason
from tests.chaos.partitions import (
    DatabaseCut,
    SchedulerCut,
    WorkerCut,
    database_cut,
    scheduler_cut,
    worker_cut,
)
from tests.chaos.scenarios import (
    BackendKills,
    DatabaseRestart,
    PoisonJobs,
    SchedulerStorm,
    WorkerKills,
    backend_kills,
    database_restart,
    poison_jobs,
    scheduler_storm,
    worker_kills,
)
from tests.chaos.skew import ClockSkew, clock_skew

SCENARIOS = (
    "worker-kills", "storm", "restart", "backends", "poison", "skew",
    "partition-worker", "partition-scheduler", "partition-db", "failover-sync", "failover-async",
)  # fmt: skip

SHORT = {
    "worker-kills": WorkerKills(),
    "storm": SchedulerStorm(),
    "restart": DatabaseRestart(),
    "backends": BackendKills(),
    "poison": PoisonJobs(),
    "partition-worker": WorkerCut(),
    "partition-scheduler": SchedulerCut(),
    "partition-db": DatabaseCut(cut=10.0),
    "skew": ClockSkew(),
    "failover-sync": Failover(),
    "failover-async": Failover(synchronous=False, quiet_kill=False),
}
LONG = {
    "worker-kills": WorkerKills(
        jobs=100_000,
        workers=4,
        concurrency=16,
        job_sleep=0.0,
        kill_every=(2.0, 5.0),
        restart_after=(0.2, 1.5),
        fault_seconds=1_200.0,
        drain_seconds=120.0,
    ),
    "storm": SchedulerStorm(replicas=16, seconds=180.0, kill_every=(0.3, 1.5), max_victims=4),
    "restart": DatabaseRestart(
        outage=10.0, jobs=3_000, workers=3, schedulers=3, recovery_seconds=60.0
    ),
    "backends": BackendKills(seconds=60.0, jobs_per_second=200, workers=3, schedulers=3),
    # A sync hang keeps its slot for its 60 s after its timeout (the executor cannot stop a
    # thread; the worker's concurrency holds): 3 hangs x 3 attempts need 9 slots, so the
    # hangs' worker has 12, as a deployment expecting hung handlers would. With 4 (the short
    # size's) every slot hung for a minute and the scenario timed out (since d6344fc).
    "poison": PoisonJobs(ordinary=5_000, job_sleep=0.005, exits=5, hangs=3, huge=3, concurrency=12),
    # cuts longer than the TCP timeouts pgbeat sets (30 s): connections die and are remade
    "partition-worker": WorkerCut(
        lease=10.0, timeout=8.0, job_seconds=5.0, cut=45.0, concurrency=8, later_jobs=500
    ),
    "partition-scheduler": SchedulerCut(replicas=4, cut=60.0, after=15.0),
    "partition-db": DatabaseCut(cut=30.0, workers=3, schedulers=3, jobs_per_second=200),
    "skew": ClockSkew(ticks=20),
    "failover-sync": Failover(
        load_seconds=20.0,
        after_seconds=15.0,
        enqueue_rate=100.0,
        workers=3,
        schedulers=3,
        tick_rounds=40,
    ),
    "failover-async": Failover(
        synchronous=False,
        quiet_kill=False,
        load_seconds=20.0,
        after_seconds=15.0,
        enqueue_rate=100.0,
        workers=3,
        schedulers=3,
        tick_rounds=40,
    ),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--long", action="store_true", help="full size (default: the short sizes)")
    size.add_argument("--short", action="store_true", help="the sizes of the pytest run")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--json", type=Path, help="results file (default bench/results/)")
    parser.add_argument("--seed", type=int, help="seed of every scenario's fault schedule")
    parser.add_argument("--jobs", type=int, help="worker kills: jobs")
    parser.add_argument("--workers", type=int, help="worker kills: worker processes")
    parser.add_argument("--replicas", type=int, help="storm: scheduler replicas")
    parser.add_argument("--storm-seconds", type=float, help="storm: how long to kill")
    parser.add_argument("--outage", type=float, help="restart: seconds PostgreSQL is down")
    parser.add_argument("--stop-mode", choices=["fast", "immediate"], help="restart: pg_ctl -m")
    parser.add_argument("--backend-seconds", type=float, help="backends: how long to kill")
    parser.add_argument(
        "--instant-exit-poison",
        action="store_true",
        help="poison: also run with poison_exit dying before any round trip of its own",
    )
    return parser.parse_args(argv)


def parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The preset, with the flags' overrides applied."""
    chosen: dict[str, Any] = dict(LONG if args.long else SHORT)
    overrides: dict[str, dict[str, Any]] = {
        "worker-kills": {"jobs": args.jobs, "workers": args.workers},
        "storm": {"replicas": args.replicas, "seconds": args.storm_seconds},
        "restart": {"outage": args.outage, "stop_mode": args.stop_mode},
        "backends": {"seconds": args.backend_seconds},
        "poison": {},
    }
    for name, fields in overrides.items():
        fields = {k: v for k, v in fields.items() if v is not None}
        if args.seed is not None:
            fields["seed"] = args.seed
        chosen[name] = replace(chosen[name], **fields)
    return chosen


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    """The administrative URL to create databases on: given, or a private embedded server."""
    if url:
        require_loopback(url)
        yield url
        return
    private = PrivateServer()
    try:
        yield private.url
    finally:
        private.close()


def run(args: argparse.Namespace) -> list[ScenarioResult]:
    chosen = parameters(args)
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = set(only) - set(SCENARIOS)
    if unknown:
        raise SystemExit(f"unknown scenarios: {', '.join(sorted(unknown))}")
    results: list[ScenarioResult] = []
    workdir = Path(tempfile.mkdtemp(prefix="pgbeat-chaos-"))
    with server(args.database_url) as admin_url:

        def on_fresh(scenario: Callable[[str], ScenarioResult]) -> Callable[[], ScenarioResult]:
            def go() -> ScenarioResult:
                with fresh_database(admin_url) as url:
                    return scenario(url)

            return go

        p = chosen
        plans: list[tuple[str, Callable[[], ScenarioResult]]] = [
            ("worker-kills", on_fresh(lambda u: worker_kills(u, p["worker-kills"]))),
            ("storm", on_fresh(lambda u: scheduler_storm(u, p["storm"], workdir))),
            ("restart", lambda: database_restart(p["restart"], workdir)),
            ("backends", on_fresh(lambda u: backend_kills(u, p["backends"], workdir))),
            ("poison", on_fresh(lambda u: poison_jobs(u, p["poison"]))),
            ("skew", on_fresh(lambda u: clock_skew(u, p["skew"], workdir))),
            ("partition-worker", partition(lambda: worker_cut(p["partition-worker"]))),
            (
                "partition-scheduler",
                partition(lambda: scheduler_cut(p["partition-scheduler"], workdir)),
            ),
            ("partition-db", partition(lambda: database_cut(p["partition-db"], workdir))),
            ("failover-sync", clusters(lambda: failover(p["failover-sync"], workdir))),
            ("failover-async", clusters(lambda: failover(p["failover-async"], workdir))),
        ]
        if args.instant_exit_poison:
            instant = replace(p["poison"], instant_exit=True)
            plans.append(("poison", on_fresh(lambda u: _renamed(poison_jobs(u, instant)))))
        for name, plan in plans:
            if name not in only:
                continue
            print(f"== {name} ...", file=sys.stderr, flush=True)
            started = time.monotonic()
            result = plan()
            result.seconds = round(time.monotonic() - started, 1)
            verdict = "; ".join(result.problems)[:300] or "ok"
            print(f"   {result.seconds}s: {verdict}", file=sys.stderr, flush=True)
            results.append(result)
    return results


def partition(scenario: Callable[[], ScenarioResult]) -> Callable[[], ScenarioResult]:
    """A partition scenario, or a skipped result that says why (no root, no ip netns)."""
    return _unless(unavailable_reason, "network partitions", scenario)


def clusters(scenario: Callable[[], ScenarioResult]) -> Callable[[], ScenarioResult]:
    """A failover scenario (two clusters of its own), or a skipped result that says why."""
    return _unless(clusters_unavailable, "primary failover", scenario)


def _unless(
    unavailable: Callable[[], str | None], name: str, scenario: Callable[[], ScenarioResult]
) -> Callable[[], ScenarioResult]:
    def go() -> ScenarioResult:
        reason = unavailable()
        if reason is None:
            return scenario()
        return ScenarioResult(name, {}, {"recovery": f"skipped: {reason}"})

    return go


def _renamed(result: ScenarioResult) -> ScenarioResult:
    result.name = "poison jobs, instant exit"
    return result


# -- reporting --------------------------------------------------------------------------------

COLUMNS = ("scenario", "load", "faults", "lost", "stuck", "dup", "missing", "re-run", "recovery")


def row(result: ScenarioResult) -> list[str]:
    figures = result.figures
    effects = figures.get("effects") or {}
    periods = (figures.get("periods") or {}).values()
    if "all_tick" in (figures.get("periods") or {}):  # the others skip periods on purpose
        missing = figures["periods"]["all_tick"]["missing"]
    else:
        missing = sum(p["missing"] for p in periods)
    return [
        result.name + (" (FAILED)" if result.problems else ""),
        str(figures.get("load", "-")),
        str(figures.get("faults", "-")),
        str(effects.get("lost", "-")),
        str(effects.get("running", "-")),
        str(sum(p["duplicates"] for p in periods)) if periods else "-",
        str(missing) if periods else "-",
        f"{effects['rerun_rate']:.2%} ({effects['rerun_jobs']} jobs)" if effects else "-",
        str(figures.get("recovery", "-")),
    ]


def table(results: list[ScenarioResult]) -> str:
    rows = [list(COLUMNS), *(row(r) for r in results)]
    lines = ["| " + " | ".join(cells) + " |" for cells in rows]
    lines.insert(1, "|" + "|".join("---" for _ in COLUMNS) + "|")
    return "\n".join(lines)


def machine(url: str | None) -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    if url:
        with contextlib.suppress(Exception), connect(url) as conn:
            info["postgres"] = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    return info


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    results = run(args)
    revision = source_revision(ROOT)
    print(f"python -m tests.chaos {' '.join(argv if argv is not None else sys.argv[1:])}".strip())
    print(f"revision {revision}, started {started:%Y-%m-%dT%H:%M:%SZ}")
    print(table(results))
    for result in results:
        for problem in result.problems:
            print(f"PROBLEM {result.name}: {problem[:2000]}")
    path = args.json or ROOT / "bench" / "results" / f"chaos-{started:%Y%m%dT%H%M%SZ}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "command": ["python", "-m", "tests.chaos", *(argv if argv is not None else sys.argv[1:])],
        "size": "long" if args.long else "short",
        "started_at": started.isoformat(),
        "revision": revision,
        "machine": machine(args.database_url),
        "ok": not any(r.problems for r in results),
        "results": [r.as_json() for r in results],
    }
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    print(f"results written to {path}")
    return 0 if document["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
