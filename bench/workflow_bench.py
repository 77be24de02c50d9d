"""``python -m bench.workflow_bench``: what workflows cost, measured in one run.

Rows (docs/workflows.md): ``enqueue_workflow`` of 1 root + N children + 1 summary; the drain
of that fan-out against the drain of N independent jobs (alternated, same worker), and of
its children once the root ended and ANALYZE ran; the
advance of the N -> 1 fan-in (the summary's start after its last parent's end) and of
small diamonds. Each drain runs an in-process Worker (100 slots) on a fresh database.

With ``--base-src`` (another revision's ``src/``), one row runs for that revision and this
one alternated, each in a child process on a fresh database of its own: before/after in
one run. The fan-out row by default; with ``--plain``, the drain of ``--plain-jobs``
independent jobs (what a queue that never uses workflows pays), and with
``--base-without-trigger`` the base's database has its workflow advance trigger dropped
(migrations 0017-0032 had one; 0033 advances from the statements that end jobs instead).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

import pgbeat
from bench import database, machine

TIMEOUT = 600.0


@contextmanager
def fresh(admin: str, name: str, trigger: bool = True) -> Iterator[str]:
    """A migrated database of its own; ``trigger=False`` drops the workflow advance's row
    trigger where the revision's migrations made one (before 0033)."""
    with database.fresh_database(admin, name) as url, psycopg.connect(url, autocommit=True) as c:
        pgbeat.apply_migrations(c)
        if not trigger:
            c.execute("DROP TRIGGER IF EXISTS jobs_workflow_advance ON jobs")
        yield url


def fan_out(children: int) -> pgbeat.Workflow:
    flow = pgbeat.Workflow("fan-out")
    root = flow.add("noop", name="root")
    reports = [flow.add("noop", {"customer": i}, after=root) for i in range(children)]
    flow.add("noop", name="summary", after=reports)
    return flow


def drain(url: str, jobs: int, enqueue: Callable[[psycopg.Connection[Any]], None]) -> float:
    """Seconds for one in-process Worker to run ``jobs`` no-op jobs ``enqueue`` inserted."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE jobs, pgbeat_workflows, pgbeat_workflow_steps, pgbeat_workflow_edges"
        )
        enqueue(conn)
        conn.execute("VACUUM ANALYZE")
    done = threading.Event()
    lock = threading.Lock()
    count = [0]
    registry = pgbeat.Registry()

    @registry.handler("noop")
    def noop(payload: Any) -> None:
        with lock:
            count[0] += 1
            if count[0] >= jobs:
                done.set()

    settings = pgbeat.WorkerSettings(concurrency=100, claim_batch=100, heartbeat=False)
    worker = pgbeat.Worker(url, registry, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    started = time.perf_counter()
    thread.start()
    finished = done.wait(TIMEOUT)
    seconds = time.perf_counter() - started
    worker.stop()
    thread.join(60)
    if not finished:
        raise RuntimeError(f"the drain of {jobs} jobs did not finish in {TIMEOUT}s")
    return seconds


def _enqueued(result: object) -> None:
    """The drains' enqueue callbacks return nothing."""


def independent(children: int) -> Callable[[psycopg.Connection[Any]], None]:
    def insert(conn: psycopg.Connection[Any]) -> None:
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", {"customer": i}) for i in range(children)])

    return insert


def fan_in_advance_ms(conn: psycopg.Connection[Any]) -> float:
    """The summary's start after the last of its parents ended (ms, database clocks)."""
    row = conn.execute(
        "SELECT extract(epoch FROM s.started_at - max(p.finished_at)) * 1000"
        " FROM pgbeat_workflow_steps AS st JOIN jobs AS s ON s.id = st.job_id"
        " JOIN pgbeat_workflow_edges AS e ON e.child_id = s.id JOIN jobs AS p ON p.id = e.parent_id"
        " WHERE st.name = 'summary' GROUP BY s.started_at"
    ).fetchone()
    assert row is not None
    return float(row[0])


def measure_enqueue(url: str, children: int, repeat: int) -> dict[str, Any]:
    times = []
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(repeat):
            flow = fan_out(children)
            started = time.perf_counter()
            pgbeat.enqueue_workflow(conn, flow)
            times.append(time.perf_counter() - started)
    return {"steps": children + 2, "best_s": min(times), "median_s": statistics.median(times)}


def measure_fan_out(url: str, children: int, repeat: int) -> dict[str, Any]:
    """``repeat`` pairs of drains, the fan-out and as many independent jobs, each side
    first in every other pair."""
    flows, plains, advances = [], [], []
    for pair in range(repeat):
        sides = ["plain", "flow"] if pair % 2 == 0 else ["flow", "plain"]
        for side in sides:
            if side == "plain":
                plains.append(drain(url, children, independent(children)))
                continue
            flows.append(
                drain(
                    url,
                    children + 2,
                    lambda c: _enqueued(pgbeat.enqueue_workflow(c, fan_out(children))),
                )
            )
            with psycopg.connect(url, autocommit=True) as conn:
                advances.append(fan_in_advance_ms(conn))
    scale = (children + 2) / children
    return {
        "independent_jobs_per_s": children / statistics.median(plains),
        "fan_out_jobs_per_s": (children + 2) / statistics.median(flows),
        "ratio": statistics.median(plains) / statistics.median(flows) * scale,
        "pair_ratios": [plain / flow * scale for plain, flow in zip(plains, flows, strict=True)],
        "fan_in_advance_ms": advances,
    }


def measure_fan_out_released(url: str, children: int, repeat: int) -> dict[str, Any]:
    """The fan-out's children and summary drained after its root ended and ANALYZE ran:
    the advance's own cost, apart from the claim plan that statistics taken while the
    children were held lead to (docs/workflows.md, "Figures")."""

    def released(conn: psycopg.Connection[Any]) -> None:
        enqueued = pgbeat.enqueue_workflow(conn, fan_out(children))
        conn.execute(
            "UPDATE jobs SET status = 'done', finished_at = now() WHERE id = %s",
            [enqueued.jobs["root"]],
        )

    flows, plains = [], []
    for _ in range(repeat):
        plains.append(drain(url, children, independent(children)))
        flows.append(drain(url, children + 1, released))
    return {
        "independent_jobs_per_s": children / statistics.median(plains),
        "children_and_summary_jobs_per_s": (children + 1) / statistics.median(flows),
        "ratio": statistics.median(plains) / statistics.median(flows) * (children + 1) / children,
    }


def measure_diamonds(url: str, count: int) -> dict[str, Any]:
    """The advance of ``count`` diamonds drained together: each join's start after its last
    parent's end, p50 and p99 (ms)."""

    def insert(conn: psycopg.Connection[Any]) -> None:
        for _ in range(count):
            flow = pgbeat.Workflow()
            a = flow.add("noop", name="a")
            flow.add("noop", name="d", after=[flow.add("noop", after=a), flow.add("noop", after=a)])
            pgbeat.enqueue_workflow(conn, flow)

    drain(url, count * 4, insert)
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT extract(epoch FROM c.started_at - max(p.finished_at)) * 1000"
            " FROM pgbeat_workflow_steps AS st JOIN jobs AS c ON c.id = st.job_id"
            " JOIN pgbeat_workflow_edges AS e ON e.child_id = c.id"
            " JOIN jobs AS p ON p.id = e.parent_id GROUP BY c.id, c.started_at"
        ).fetchall()
    values = sorted(float(r[0]) for r in rows)
    return {
        "samples": len(values),
        "p50_ms": statistics.median(values),
        "p99_ms": values[min(len(values) - 1, int(len(values) * 0.99))],
    }


def plain_child(jobs: int, trigger: bool) -> dict[str, Any]:
    """The drain of ``jobs`` independent jobs on a fresh database, in a child importing
    pgbeat from its PYTHONPATH."""
    with fresh(database.admin_url(), "wf_plain", trigger=trigger) as url:
        return {"jobs_per_s": jobs / drain(url, jobs, independent(jobs))}


def fan_out_child(children: int, repeat: int) -> dict[str, Any]:
    """The fan-out row on a fresh database, in a child importing pgbeat from its PYTHONPATH."""
    with fresh(database.admin_url(), "wf_fan_out") as url:
        return measure_fan_out(url, children, repeat)


def _alternated(
    base: Path, repeat: int, child: list[str], base_child: list[str], figure: str
) -> dict[str, list[dict[str, Any]]]:
    """``repeat`` runs of the child for ``base`` and this revision, alternated (base first
    every other run), one child process each time."""
    here = Path(__file__).resolve().parent.parent / "src"
    runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
    for run in range(repeat):
        order = [("base", base, base_child), ("this", here, child)]
        for side, src, arguments in order if run % 2 == 0 else order[::-1]:
            done = subprocess.run(
                [sys.executable, "-m", "bench.workflow_bench", *arguments],
                env=machine.revision_env(src), capture_output=True, text=True,
                timeout=TIMEOUT, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(f"the {side} child failed: {done.stderr[-2000:]}")
            runs[side].append(json.loads(done.stdout))
            print(f"{side}: {figure} {runs[side][-1][figure]:.3f}", file=sys.stderr)
    return runs


def measure_plain_against(base: Path, jobs: int, repeat: int, base_trigger: bool) -> dict[str, Any]:
    """The drain of ``jobs`` independent jobs for ``base`` and this revision, alternated;
    ``base_trigger=False`` drops the base's workflow advance trigger."""
    child = ["--plain-child", "--plain-jobs", str(jobs)]
    base_child = child if base_trigger else [*child, "--base-without-trigger"]
    runs = _alternated(base, repeat, child, base_child, "jobs_per_s")
    pairs = zip(runs["this"], runs["base"], strict=True)
    paired = [t["jobs_per_s"] / b["jobs_per_s"] for t, b in pairs]
    return {
        "jobs": jobs,
        "base_trigger": base_trigger,
        "base_jobs_per_s": [round(r["jobs_per_s"]) for r in runs["base"]],
        "this_jobs_per_s": [round(r["jobs_per_s"]) for r in runs["this"]],
        "this_over_base_paired": [round(r, 3) for r in paired],
        "this_over_base_median_paired": round(statistics.median(paired), 3),
    }


def measure_against(base: Path, children: int, repeat: int) -> dict[str, Any]:
    """The fan-out row for ``base`` and this revision, alternated (base first every other
    run), one child process each time."""
    child = ["--fan-out-child", "--children", str(children)]
    runs = _alternated(base, repeat, child, child, "ratio")
    return {
        side: {
            "ratios": [round(r["ratio"], 3) for r in rows],
            "ratio_median": round(statistics.median(r["ratio"] for r in rows), 3),
            "fan_out_jobs_per_s": [round(r["fan_out_jobs_per_s"]) for r in rows],
            "independent_jobs_per_s": [round(r["independent_jobs_per_s"]) for r in rows],
        }
        for side, rows in runs.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workflow_bench", description=__doc__)
    parser.add_argument("--children", type=int, default=10_000, help="fan-out width (10,000)")
    parser.add_argument("--diamonds", type=int, default=300, help="diamonds drained (300)")
    parser.add_argument("--plain-jobs", type=int, default=20_000, help="plain drain size (20,000)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each row (3)")
    parser.add_argument("--output", type=Path, help="write the rows as JSON here")
    parser.add_argument("--base-src", type=Path, help="another revision's src/: A/B")
    parser.add_argument("--plain", action="store_true", help="A/B the plain drain")
    parser.add_argument(
        "--base-without-trigger", action="store_true", help="drop the base's advance trigger"
    )
    parser.add_argument("--fan-out-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--plain-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fan_out_child:
        print(json.dumps(fan_out_child(args.children, 1)))
        return 0
    if args.plain_child:
        print(json.dumps(plain_child(args.plain_jobs, not args.base_without_trigger)))
        return 0
    admin = database.admin_url()
    report: dict[str, Any] = {"load_average_1m_at_start": machine.load()}
    if args.base_src is not None and args.plain:
        report["plain_drain_ab"] = measure_plain_against(
            args.base_src, args.plain_jobs, args.repeat, not args.base_without_trigger
        )
        report["load_average_1m_at_end"] = machine.load()
        print(json.dumps(report, indent=2))
        return 0
    if args.base_src is not None:
        report["fan_out_drain_ab"] = measure_against(args.base_src, args.children, args.repeat)
        report["load_average_1m_at_end"] = machine.load()
        print(json.dumps(report, indent=2))
        return 0
    with fresh(admin, "wf_bench") as url:
        report["enqueue_workflow"] = measure_enqueue(url, args.children, args.repeat)
        report["fan_out_drain"] = measure_fan_out(url, args.children, args.repeat)
        report["fan_out_drain_released_analyzed"] = measure_fan_out_released(
            url, args.children, args.repeat
        )
        report["diamond_advance"] = measure_diamonds(url, args.diamonds)
    report["load_average_1m_at_end"] = machine.load()
    machine.dump(report, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
