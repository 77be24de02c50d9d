"""Workflow races with real worker processes: diamonds and fan-outs (root -> N -> summary)
drained by several `pgbeat worker` processes at once, optionally killing one with -9 or
restarting the database mid-run.

The audit: no step started before each of its parents ended done (a step's first start
against its parents' finished_at), no step's handler ran to its end twice, a step whose
parent failed never ran (its dependants end cancelled), and no workflow is left with a
live step. ``python -m tests.chaos.workflow_race`` runs the full size (4 processes, 300
diamonds and 50 fan-outs of 200, 10 runs, the first killing a worker, the second on a
private PostgreSQL 15 cluster stopped (``--restart fast``, a clean restart, or
``immediate``, a crash) for ``--outage`` seconds and started again) and prints one JSON
line per run; tests/integration/test_workflow_processes.py runs it small.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import psycopg

import pgbeat
from tests.apps.workflow_app import SETUP
from tests.chaos import races
from tests.helpers import CliProcess, wait_for

APP = "tests.apps.workflow_app:registry"


def workers(url: str, count: int, flags: list[str]) -> AbstractContextManager[list[CliProcess]]:
    """``count`` worker processes of the workflow app."""
    return races.workers(url, APP, count, flags)


@dataclass(frozen=True)
class WorkflowRace:
    processes: int = 2
    slots: int = 10
    diamonds: int = 40
    fan_outs: int = 4
    width: int = 30
    failures: float = 0.05  # the share of diamonds whose left branch fails
    sleep: float = 0.002
    kill: bool = False
    timeout: float = 180.0
    # A run's lease (seconds): short, so that a killed worker's steps run again soon; longer
    # than the outage of a restart run, so that a step that ended before the stop keeps its
    # lease until its worker, reconnected, writes the outcome it kept (a shorter lease
    # lets another worker run it again: at least once, and the audit counts it "twice").
    lease: float = 3.0
    # A run's timeout (seconds). In a restart run a handler's own statements wait out the
    # outage: a timeout shorter than it ends the run as timed out (retried) while the
    # handler goes on to its end, which the audit would count as a second completion.
    job_timeout: float = 2.0


def enqueue(conn: psycopg.Connection[Any], race: WorkflowRace) -> int:
    """The race's workflows, shuffled; returns how many steps."""
    rng = random.Random(race.diamonds)
    flows = []
    step = {"sleep": race.sleep}
    for i in range(race.diamonds):
        flow = pgbeat.Workflow(f"diamond {i}")
        a = flow.add("wstep", step, name="a")
        b = flow.add("wstep", {**step, "fail": rng.random() < race.failures}, name="b", after=a)
        c = flow.add("wstep", step, name="c", after=a)
        flow.add("wstep", step, name="d", after=[b, c])
        flow.add("wstep", step, name="e", after=[b, c], on_parent_failure="run")
        flows.append(flow)
    for i in range(race.fan_outs):
        flow = pgbeat.Workflow(f"fan-out {i}")
        root = flow.add("wstep", step, name="root")
        middle = [flow.add("wstep", step, after=root) for _ in range(race.width)]
        flow.add("wstep", step, name="summary", after=middle)
        flows.append(flow)
    rng.shuffle(flows)
    for flow in flows:
        pgbeat.enqueue_workflow(conn, flow)
    return sum(len(flow.steps) for flow in flows)


def live_steps(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM jobs WHERE workflow_id IS NOT NULL"
        " AND status IN ('pending', 'running')"
    ).fetchone()
    return int(row[0]) if row else 0


def busy(conn: psycopg.Connection[Any], pid: int) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM wf_runs WHERE pid = %s AND ended_at IS NULL", (pid,)
    ).fetchone()
    return bool(row and row[0])


AUDIT = """
WITH first_start AS (
    SELECT job_id, min(started_at) AS started_at, count(ended_at) AS completed, count(*) AS runs
    FROM wf_runs GROUP BY job_id
)
SELECT
  (SELECT count(*) FROM first_start AS f
   JOIN pgbeat_workflow_edges AS e ON e.child_id = f.job_id
   JOIN jobs AS p ON p.id = e.parent_id
   JOIN pgbeat_workflow_steps AS s ON s.job_id = f.job_id
   WHERE (p.status <> 'done' AND s.on_parent_failure = 'cancel')
      OR p.finished_at IS NULL OR p.finished_at > f.started_at) AS early,
  (SELECT count(*) FROM first_start WHERE completed > 1) AS twice,
  (SELECT count(*) FROM first_start WHERE runs > 1) AS rerun,
  (SELECT count(*) FROM jobs WHERE workflow_id IS NOT NULL
     AND status IN ('pending', 'running')) AS unfinished,
  (SELECT count(*) FROM jobs AS j JOIN pgbeat_workflow_steps AS s ON s.job_id = j.id
   WHERE j.status = 'cancelled' AND s.on_parent_failure = 'cancel'
     AND NOT EXISTS (SELECT FROM pgbeat_workflow_edges AS e JOIN jobs AS p ON p.id = e.parent_id
                     WHERE e.child_id = j.id AND p.status <> 'done')) AS wrongly_cancelled,
  (SELECT count(*) FROM jobs WHERE workflow_id IS NOT NULL AND status = 'done') AS done,
  (SELECT count(*) FROM jobs WHERE workflow_id IS NOT NULL AND status = 'failed') AS failed,
  (SELECT count(*) FROM jobs WHERE workflow_id IS NOT NULL AND status = 'cancelled') AS cancelled
"""


def reconnect(url: str, timeout: float) -> psycopg.Connection[Any]:
    """A connection to ``url`` once its server accepts one again (after a restart)."""
    opened: list[psycopg.Connection[Any]] = []

    def connected() -> bool:
        try:
            opened.append(psycopg.connect(url, autocommit=True, connect_timeout=2))
        except psycopg.OperationalError:
            return False
        return True

    wait_for(connected, timeout=timeout, interval=0.1, message="the restarted server")
    return opened[0]


def workflow_race(
    url: str, race: WorkflowRace, restart: Callable[[], None] | None = None
) -> dict[str, Any]:
    """Run one race; returns the audit (early, twice, unfinished, wrongly_cancelled must be 0).

    ``restart``: stops and starts the database's server, called once a quarter of the
    steps ended (the workers reconnect on their own; the audit reconnects too).
    """
    conn = psycopg.connect(url, autocommit=True)
    try:
        conn.execute(SETUP.encode())
        steps = enqueue(conn, race)
        flags = ["--concurrency", str(race.slots), "--lease", f"{race.lease:g}s"]
        flags += ["--timeout", f"{race.job_timeout:g}s"]
        started = time.monotonic()
        killed = restarted = 0
        with workers(url, race.processes, flags) as fleet:
            if restart is not None:
                wait_for(
                    lambda: live_steps(conn) <= steps * 3 // 4,
                    timeout=race.timeout,
                    interval=0.005,
                    message="a quarter of the steps ended",
                )
                conn.close()
                restart()
                restarted = 1
                conn = reconnect(url, 60)
            if race.kill:
                races.kill_one_midway(
                    fleet,
                    lambda pid: live_steps(conn) <= steps * 3 // 4 and busy(conn, pid),
                    race.timeout,
                    "a step",
                )
                killed = 1
            wait_for(
                lambda: live_steps(conn) == 0,
                timeout=race.timeout,
                interval=0.1,
                message="every workflow finished",
            )
        seconds = time.monotonic() - started
        row = conn.execute(AUDIT).fetchone()
        assert row is not None
        names = ("early", "twice", "rerun", "unfinished", "wrongly_cancelled")
        audit = dict(zip((*names, "done", "failed", "cancelled"), map(int, row), strict=True))
    finally:
        conn.close()
    return {
        "steps": steps,
        "processes": race.processes,
        "killed": killed,
        "database_restarted": restarted,
        **audit,
        "seconds": round(seconds, 2),
        "steps_per_s": round(steps / seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.workflow_race")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--slots", type=int, default=20)
    parser.add_argument("--diamonds", type=int, default=300)
    parser.add_argument("--fan-outs", type=int, default=50)
    parser.add_argument("--width", type=int, default=200)
    parser.add_argument(
        "--restart",
        choices=("immediate", "fast", "none"),
        default="fast",
        help="how run 1 stops its database mid-run (a private PostgreSQL 15 cluster, "
        "tests/chaos/clusters.py) before starting it again: fast, a clean restart (default); "
        "immediate, a crash of the server, which may forget the workers' last commits "
        "(synchronous_commit = off, docs/operations.md): their steps run again, as after kill -9",
    )
    parser.add_argument("--outage", type=float, default=2.0, help="seconds stopped (2)")
    parser.add_argument(
        "--restart-lease",
        type=float,
        default=30.0,
        help="the restart run's lease, s (30; its timeout half that)",
    )
    parser.add_argument("--first-run", type=int, default=0, help="start at this run (0)")
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error("give --database-url or DATABASE_URL (a server to create databases on)")
    failed = 0
    for run in range(args.first_run, args.runs):
        race = WorkflowRace(
            args.processes,
            args.slots,
            args.diamonds,
            args.fan_outs,
            args.width,
            kill=run == 0,
            timeout=900,
        )
        restarted = run == 1 and args.restart != "none"
        if restarted:
            lease = args.restart_lease
            race = dataclasses.replace(race, lease=lease, job_timeout=lease / 2)
        result = one_run(args.database_url, race, args.restart if restarted else None, args.outage)
        bad = result["early"] + result["unfinished"] + result["wrongly_cancelled"]
        at_least_once = race.kill or (restarted and args.restart == "immediate")
        failed += bad > 0 or (result["twice"] > 0 and not at_least_once)
        print(json.dumps({"run": run, **result}), flush=True)
    return 1 if failed else 0


def one_run(
    server_url: str, race: WorkflowRace, restart: str | None, outage: float
) -> dict[str, Any]:
    """One race on a fresh database of ``server_url``'s server, or, with ``restart`` (a
    ``pg_ctl stop`` mode), of a private cluster stopped for ``outage`` seconds mid-run."""
    from tests.chaos.clusters import lone_cluster, unavailable_reason
    from tests.chaos.harness import fresh_database

    if restart is None:
        with fresh_database(server_url) as url:
            return workflow_race(url, race)
    reason = unavailable_reason()
    if reason is not None:
        raise SystemExit(f"the restart run needs a private cluster: {reason} (or --restart none)")
    with lone_cluster() as cluster, fresh_database(cluster.url()) as url:

        def stop_and_start() -> None:
            cluster.stop(restart)
            time.sleep(outage)
            cluster.start()

        return workflow_race(url, race, stop_and_start)


if __name__ == "__main__":
    sys.exit(main())
