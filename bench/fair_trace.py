"""``python -m bench.fair_trace``: where key B's slowest starts wait in a fair queue.

The fairness run of bench.tenant_bench (queue "tenants", concurrency 50, key A's backlog of
20 ms jobs enqueued first, one B job every 20 ms) with every worker process traced from
outside pgbeat's code (its methods wrapped in the forked workers, nothing in src/): each
limited claim's round trip and budget, each notification and freed-slot wake, each loop
step and the sleep it chose. For each of B's jobs it says which process claimed it, how
long after its insert's commit, what woke that claim, and how many claims of the full
queue ran between; then the same for the slowest 1 % (docs/flow-control.md quotes it).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg

import pgbeat
from bench import database, machine
from bench.flow_bench import percentile, plant_fairness
from bench.tenant_bench import run_until, worker_settings
from pgbeat.worker import limited_claims, locked_claim
from pgbeat.worker import worker as worker_module

EVENTS: list[tuple[Any, ...]] = []  # this process's trace: (what, wall time, ...)


def install() -> None:
    """Wrap the worker's wakes, steps and limited claims to append to EVENTS."""
    worker_class = worker_module.Worker
    on_notify, on_freed, step = (
        worker_class._on_notify, worker_class._on_freed, worker_class._step,
    )  # fmt: skip
    claim_locked = locked_claim.claim_locked

    def traced_notify(self: Any) -> None:
        EVENTS.append(("notify", time.time()))
        on_notify(self)

    def traced_freed(self: Any, queues: Mapping[str, float]) -> None:
        EVENTS.append(("freed", time.time()))
        on_freed(self, queues)

    def traced_step(self: Any) -> float:
        began = time.time()
        flags = (self._notified, bool(self._freed), self._executor.free_slots())
        pause = step(self)
        EVENTS.append(("step", began, time.time(), *flags, pause))
        return pause

    def traced_claim(
        conn: Any, statement: Any, params: dict[str, Any], kept: Any = None, named: Any = None
    ) -> Any:
        began = time.time()
        rows, budget = claim_locked(conn, statement, params, kept, named)
        ids = [row[0] for row in rows]
        keys = "".join(sorted({str(row[locked_claim.LIMIT_KEY]) for row in rows}))
        granted = None if budget is None else budget[0]
        steps = params.get("steps")  # the worker's pace for the queue (fair_steps.py)
        EVENTS.append(("claim", began, time.time(), granted, ids, keys, steps))
        return rows, budget

    worker_class._on_notify = traced_notify  # type: ignore[method-assign]
    worker_class._on_freed = traced_freed  # type: ignore[method-assign]
    worker_class._step = traced_step  # type: ignore[method-assign]
    limited_claims.claim_locked = traced_claim  # type: ignore[attr-defined]


def _serve(url: str, out: str, stop: Any) -> None:
    """One traced worker process (50 slots, 20 ms jobs); its trace written to ``out``."""
    install()
    registry = pgbeat.Registry()
    for kind in ("a", "b"):
        registry.handler(kind)(lambda payload: time.sleep(0.02))
    run_until(pgbeat.Worker(url, registry, worker_settings(50)), stop)
    Path(out).write_text(json.dumps(EVENTS))


def run_traced(url: str, backlog: int, samples: int, processes: int, out: Path) -> dict[str, Any]:
    """The fairness run with traced workers; returns B's jobs and every process's trace."""
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    with psycopg.connect(url, autocommit=True) as conn:
        plant_fairness(conn, backlog, True)
        files = [out / f"trace-{n}.json" for n in range(processes)]
        children = [context.Process(target=_serve, args=(url, str(f), stop)) for f in files]
        for child in children:
            child.start()
        time.sleep(1.0)
        enqueued: dict[int, tuple[float, float]] = {}
        for _ in range(samples):
            began = time.time()
            job_id = pgbeat.enqueue(conn, "b", queue="tenants", limit_key="B")
            assert job_id is not None  # no job_key: never deduplicated
            enqueued[job_id] = (began, time.time())
            time.sleep(0.02)
        query = "SELECT count(*) FROM jobs WHERE kind = 'b' AND started_at IS NOT NULL"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            row = conn.execute(query).fetchone()
            if row is not None and row[0] >= samples:
                break
            time.sleep(0.05)
        stop.set()
        for child in children:
            child.join(90)
            if child.is_alive():
                child.kill()
        rows = conn.execute(
            "SELECT id, extract(epoch FROM created_at)::float8,"
            " extract(epoch FROM started_at)::float8 FROM jobs WHERE kind = 'b'"
        ).fetchall()
    b_jobs = [
        {"id": i, "sent": enqueued[i][0], "committed": enqueued[i][1], "created": c, "started": s}
        for i, c, s in rows
    ]
    traces = [json.loads(f.read_text()) for f in files]
    return {"b": b_jobs, "traces": traces}


def _woke_by(trace: list[Any], step_times: list[float], claim_began: float) -> dict[str, Any]:
    """The step that ran a claim: what it had heard (notify, freed) and the step before's
    chosen sleep (how the loop came to run then)."""
    at = bisect.bisect_right(step_times, claim_began) - 1
    steps = [e for e in trace if e[0] == "step"]
    if at < 0:
        return {"why": "first"}
    _, began, _, notified, freed, free_slots, _ = steps[at]
    before = steps[at - 1] if at > 0 else None
    slept = before[-1] if before is not None else None
    gap = began - before[2] if before is not None else None
    if freed:
        why = "freed"
    elif notified:
        why = "notify"
    elif slept is not None and gap is not None and gap >= slept - 0.001 and slept > 0.003:
        why = f"timer {slept * 1000:.0f} ms"
    else:
        why = "other wake"
    return {"why": why, "step_began": began, "slept_before": slept, "free_slots": free_slots}


def analyse(found: dict[str, Any]) -> dict[str, Any]:
    """Per B job: the claim that took it, what woke that claim, the claims between."""
    claims: list[tuple[int, list[Any]]] = []
    by_id: dict[int, tuple[int, list[Any]]] = {}
    for proc, trace in enumerate(found["traces"]):
        for event in trace:
            if event[0] == "claim":
                claims.append((proc, event))
                for job_id in event[4]:
                    by_id[job_id] = (proc, event)
    claims.sort(key=lambda c: c[1][1])
    step_times = [[e[1] for e in trace if e[0] == "step"] for trace in found["traces"]]
    notifies = [sorted(e[1] for e in trace if e[0] == "notify") for trace in found["traces"]]
    frees = sorted(e[1] for trace in found["traces"] for e in trace if e[0] == "freed")
    rows = []
    for job in found["b"]:
        proc, claim = by_id.get(job["id"], (-1, None))
        wait = job["started"] - job["created"] if job["started"] else None
        row: dict[str, Any] = {"id": job["id"], "wait_ms": _ms(wait), "process": proc}
        if claim is not None:
            committed = job["committed"]
            between = [c for c in claims if committed < c[1][1] < claim[1]]
            # found a free slot after B's commit, and committed before the claim of B: took
            # other keys' jobs instead (claims of the queue take its row lock in turn)
            skipped = [c for c in between if c[1][3] and c[1][2] < claim[2] and "B" not in c[1][5]]
            first_free = (
                frees[bisect.bisect_right(frees, committed)]
                if frees and frees[-1] > committed
                else None
            )
            heard = [
                n[bisect.bisect_right(n, job["sent"])]
                for n in notifies
                if n and n[-1] > job["sent"]
            ]
            row.update(
                claim_after_commit_ms=_ms(claim[1] - committed),
                claim_round_trip_ms=_ms(claim[2] - claim[1]),
                commit_ms=_ms(committed - job["sent"]),
                granted=claim[3],
                took=len(claim[4]),
                keys=claim[5],
                claims_between=len(between),
                granted_between=[c[1][3] for c in between],
                skipped_by=len(skipped),
                first_free_after_commit_ms=_ms(first_free - committed) if first_free else None,
                first_notify_after_send_ms=_ms(min(heard) - job["sent"]) if heard else None,
                **_woke_by(found["traces"][proc], step_times[proc], claim[1]),
            )
            if "step_began" in row:
                row["step_began_after_commit_ms"] = _ms(row.pop("step_began") - committed)
        rows.append(row)
    rows.sort(key=lambda r: r["wait_ms"] if r["wait_ms"] is not None else 1e9)
    waits = [r["wait_ms"] for r in rows if r["wait_ms"] is not None]
    tail = rows[-max(1, len(rows) // 100) :]
    return {
        "b_start_p50_ms": round(percentile(waits, 0.5), 1),
        "b_start_p99_ms": round(percentile(waits, 0.99), 1),
        "why_counts": _count(r.get("why") for r in rows),
        "b_skipped_by_a_claim_with_room": sum(1 for r in rows if r.get("skipped_by")),
        "why_counts_slowest_5pct": _count(r.get("why") for r in rows[-max(1, len(rows) // 20) :]),
        "claim_gaps": _claim_gaps(claims),
        "where_b_waits": {
            field: _spread([r[field] for r in rows if r.get(field) is not None])
            for field in (
                "wait_ms",
                "commit_ms",
                "first_free_after_commit_ms",
                "claim_after_commit_ms",
                "claim_round_trip_ms",
                "granted",
            )
        },
        "slowest": tail,
        "slowest_5pct": rows[-max(1, len(rows) // 20) :],
    }


def _claim_gaps(claims: list[tuple[int, list[Any]]]) -> dict[str, Any]:
    """Gaps between consecutive claims that found a free slot (any process), in ms; the
    claims' round trips; how many claims ran at each pace (steps)."""
    granted = [c[1][1] for c in claims if c[1][3]]
    gaps = [1000 * (b - a) for a, b in itertools.pairwise(granted)]
    round_trips = [1000 * (c[1][2] - c[1][1]) for c in claims]
    steps = _count(c[1][6] if len(c[1]) > 6 else None for c in claims)
    return {
        "granted_gap_p50": round(percentile(gaps, 0.5), 2),
        "granted_gap_p99": round(percentile(gaps, 0.99), 2),
        "round_trip_p50": round(percentile(round_trips, 0.5), 2),
        "round_trip_p99": round(percentile(round_trips, 0.99), 2),
        "claims": len(claims),
        "granted_claims": len(granted),
        "steps": steps,
    }


def _spread(values: list[Any]) -> dict[str, float]:
    """p50 / p90 / p99 of a field of B's rows."""
    if not values:
        return {}
    return {f"p{int(q * 100)}": round(percentile(values, q), 1) for q in (0.5, 0.9, 0.99)}


def _count(values: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[str(value)] = counts.get(str(value), 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fair_trace", description=__doc__)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--backlog", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--output", type=Path, default=Path("/tmp/fair_trace"))
    args = parser.parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    admin = database.admin_url()
    report: dict[str, Any] = {"load_average_1m_at_start": machine.load(), "runs": []}
    for run in range(args.runs):
        with database.fresh_database(admin, "fair_trace") as url:
            found = run_traced(url, args.backlog, args.samples, args.processes, args.output)
        (args.output / f"raw-{run}.json").write_text(json.dumps(found))
        report["runs"].append(analyse(found))
        print(json.dumps({k: v for k, v in report["runs"][-1].items() if "slowest" not in k}),
              file=sys.stderr)  # fmt: skip
    report["load_average_1m_at_end"] = machine.load()
    p99 = [r["b_start_p99_ms"] for r in report["runs"]]
    report["b_start_p99_ms_median"] = statistics.median(p99)
    (args.output / "report.json").write_text(json.dumps(report, indent=1))
    print(f"written to {args.output / 'report.json'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
