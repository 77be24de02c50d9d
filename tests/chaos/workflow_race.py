"""Workflow races with real worker processes: diamonds and fan-outs (root -> N -> summary)
drained by several `pgbeat worker` processes at once, optionally killing one with -9.

The audit: no step started before each of its parents ended done (a step's first start
against its parents' finished_at), no step's handler ran to its end twice, a step whose
parent failed never ran (its dependants end cancelled), and no workflow is left with a
live step. ``python -m tests.chaos.workflow_race`` runs the full size (4 processes, 300
diamonds and 50 fan-outs of 200, 10 runs, the first killing a worker) and prints one JSON
line per run; tests/integration/test_workflow_processes.py runs it small.
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from typing import Any

import psycopg

import pgbeat
from tests.apps.workflow_app import SETUP
from tests.chaos import races

APP = "tests.apps.workflow_app:registry"


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


def workflow_race(url: str, race: WorkflowRace) -> dict[str, Any]:
    """Run one race; returns the audit (early, twice, unfinished, wrongly_cancelled must be 0)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(SETUP.encode())
        steps = enqueue(conn, race)
        killed, seconds = races.drain(
            url,
            races.Drain(APP, race.processes, race.slots, race.kill, race.timeout),
            lambda pid: live_steps(conn) <= steps * 3 // 4 and busy(conn, pid),
            lambda: live_steps(conn) == 0,
            "workflow step",
        )
        row = conn.execute(AUDIT).fetchone()
        assert row is not None
        names = ("early", "twice", "rerun", "unfinished", "wrongly_cancelled")
        audit = dict(zip((*names, "done", "failed", "cancelled"), map(int, row), strict=True))
    return {
        "steps": steps,
        "processes": race.processes,
        "killed": killed,
        **audit,
        "seconds": round(seconds, 2),
        "steps_per_s": round(steps / seconds),
    }


def main(argv: list[str] | None = None) -> int:
    options = races.parser("python -m tests.chaos.workflow_race", slots=20)
    options.add_argument("--diamonds", type=int, default=300)
    options.add_argument("--fan-outs", type=int, default=50)
    options.add_argument("--width", type=int, default=200)

    def one_run(url: str, args: argparse.Namespace, kill: bool) -> tuple[dict[str, Any], bool]:
        race = WorkflowRace(
            args.processes,
            args.slots,
            args.diamonds,
            args.fan_outs,
            args.width,
            kill=kill,
            timeout=900,
        )
        result = workflow_race(url, race)
        bad = result["early"] + result["unfinished"] + result["wrongly_cancelled"]
        return result, bad > 0 or (result["twice"] > 0 and not race.kill)

    return races.run_races(options, argv, one_run)


if __name__ == "__main__":
    sys.exit(main())
