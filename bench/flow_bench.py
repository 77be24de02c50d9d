"""``python -m bench.flow_bench``: what flow control costs, measured in one run.

Rows: the unlimited drain of this revision against another one (``--base-src``, e.g. a
git worktree of the revision before flow control), alternated run by run; a drain with
``key_concurrency = 1`` over 500 keys against the same jobs unlimited; a rate-limited
queue next to an unlimited one; a high-priority job's wait behind a 200,000-job backlog;
and the claim's plan over 1,000,000 pending jobs. Each drain runs in a child process on a
fresh database, importing pgbeat from the source tree it is given. See docs/flow-control.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

import pgbeat  # children: the revision their PYTHONPATH puts first
from bench import database, machine
from bench.report import save_report

REPO_ROOT = Path(__file__).resolve().parents[1]
CHILD_TIMEOUT = 900.0
SHAPE_SECONDS = 8.0  # a shapes row's drain stops here (jobs/s of what ran)
OTHER_JOBS = 250_000  # the unlimited queue's jobs beside (or without) a rate-limited one


# -- children: one measurement each, on the pgbeat their PYTHONPATH gives --------------------


def enqueue_noops(conn: psycopg.Connection[Any], jobs: int, keys: int, distinct: bool) -> None:
    """``jobs`` no-op jobs, over ``keys`` limit keys of queue "keyed" if any.

    Enqueued 1,000 a statement, so a batch shares one run_at (its now()), unless
    ``distinct``: then each job's run_at is a microsecond apart, as jobs enqueued one by
    one are (an index on run_at alone stores a shared value once, B-tree deduplication).
    """
    epoch = datetime.now(UTC) - timedelta(hours=1)
    for start in range(0, jobs, 1000):
        batch = []
        for i in range(start, min(jobs, start + 1000)):
            fields: dict[str, Any] = {}
            if keys:
                fields = {"queue": "keyed", "limit_key": f"k{i % keys}"}
            if distinct:
                fields["run_at"] = epoch + timedelta(microseconds=i)
            batch.append(pgbeat.NewJob("noop", {}, **fields))
        pgbeat.enqueue_many(conn, batch)


# What the shapes rows put beside the drain: what a worker cannot take (issue 34's table).
SHAPES: tuple[str, ...] = ("limited_empty_20", "limited_empty_200", "delayed_queues")
SHAPES += ("key_rate_waiting", "foreign_kind", "all")


def plant_shape(conn: psycopg.Connection[Any], shape: str) -> None:
    """Beside the drain: queues, keys or jobs the draining worker cannot take."""
    for one in SHAPES[:-1] if shape == "all" else (shape,):
        if one.startswith("limited_empty_"):
            for i in range(int(one.rsplit("_", 1)[1])):
                pgbeat.configure_queue(conn, f"limited{i:03}", concurrency=5)
        elif one == "delayed_queues":  # 20,000 delayed jobs in 20,000 queues, one paused
            conn.execute(
                "INSERT INTO jobs (kind, payload, queue, run_at) SELECT 'noop', '{}',"
                " 'tenant' || i, now() + interval '1 day' FROM generate_series(1, 20000) i"
            )
            pgbeat.pause_queue(conn, "paused")
            conn.execute("INSERT INTO jobs (kind, payload, queue) VALUES ('noop', '{}', 'paused')")
        elif one == "key_rate_waiting":  # 20,000 keys whose window is spent
            pgbeat.configure_queue(conn, "partner", key_rate="1/1h")
            conn.execute(
                "INSERT INTO jobs (kind, payload, queue, limit_key) SELECT 'noop', '{}',"
                " 'partner', 'key' || i FROM generate_series(1, 20000) i"
            )
            conn.execute(
                "INSERT INTO pgbeat_queue_starts (queue, limit_key, started_at)"
                " SELECT 'partner', 'key' || i, now() FROM generate_series(1, 20000) i"
            )
        elif one == "foreign_kind":  # due jobs of a kind this worker has no handler for
            conn.execute(
                "INSERT INTO jobs (kind, payload, run_at) SELECT 'other', '{}',"
                " now() - interval '2 hours' FROM generate_series(1, 200000)"
            )


def child_drain(
    url: str,
    jobs: int,
    keys: int,
    key_concurrency: int | None,
    distinct: bool = False,
    beside: str = "",
    slots: int = 100,
    max_seconds: float = CHILD_TIMEOUT,
    statistics: str = "fresh",
) -> dict[str, Any]:
    """Seconds for one in-process Worker (100 slots) to run ``jobs`` no-op jobs (with
    ``beside``, one of SHAPES, planted first). ``statistics``: "fresh" (ANALYZE after the
    enqueue); "delayed" or "refreshed" (the jobs are delayed a day and brought back, and
    ANALYZE runs while they are delayed, or after they are back: bench/stale_stats.py)."""
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        if beside:
            plant_shape(conn, beside)
        enqueue_noops(conn, jobs, keys, distinct)
        if key_concurrency is not None:
            pgbeat.configure_queue(conn, "keyed", key_concurrency=key_concurrency)
        if statistics != "fresh":
            conn.execute("UPDATE jobs SET run_at = run_at + interval '1 day'")
            if statistics == "delayed":
                conn.execute("VACUUM ANALYZE jobs")  # a quiet night: every job delayed
            conn.execute("UPDATE jobs SET run_at = run_at - interval '1 day'")  # the burst
        conn.execute("VACUUM jobs" if statistics == "delayed" else "VACUUM ANALYZE jobs")
    done = threading.Event()
    counter = Counter[str]()
    lock = threading.Lock()
    registry = pgbeat.Registry()

    @registry.handler("noop")
    def noop(payload: Any) -> None:
        with lock:
            counter["n"] += 1
            if counter["n"] >= jobs:
                done.set()

    settings = pgbeat.WorkerSettings(concurrency=slots, claim_batch=slots, heartbeat=False)
    worker = pgbeat.Worker(url, registry, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    started, cpu = time.perf_counter(), time.process_time()
    thread.start()
    finished = done.wait(max_seconds)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    with lock:
        ran = counter["n"]
    db_cpu = backends_cpu_seconds(url)  # the worker's connections, all opened after `started`
    worker.stop()
    thread.join(60)
    return {
        "seconds": seconds,
        "worker_cpu_s": cpu,
        "db_cpu_s": db_cpu,
        "jobs": jobs,
        "ran": ran,
        "jobs_per_s": ran / seconds,
        "finished": finished,
    }


def backends_cpu_seconds(url: str) -> float | None:
    """CPU seconds spent so far by the other server processes of ``url``'s database.

    Read from /proc (the benchmarks run on a local server): CPU is steadier than wall
    time on a small, busy machine, where the worker and the server share two cores.
    None when the server's processes cannot be read.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        pids = [
            int(pid)
            for (pid,) in conn.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        ]
    try:
        return sum(machine.process_cpu(pid)[1] for pid in pids)
    except (OSError, IndexError, ValueError):
        return None


def child_rate(url: str, rate: str, seconds: float, limited: bool) -> dict[str, Any]:
    """Starts per second of an unlimited queue, and of a rate-limited one beside it."""
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        # Enough for the whole measurement at the unlimited queue's full speed (~30,000/s
        # here): with 40,000 the queue alone ran dry within the warm-up, and its "alone"
        # figure was the tail of its drain (2,280/s), hiding that it ran at a fifth of its
        # speed beside a rate-limited queue.
        for queue, count in (("other", OTHER_JOBS), ("limited", 20_000 if limited else 0)):
            conn.execute(
                "INSERT INTO jobs (kind, payload, queue) "
                "SELECT 'noop', '{}', %s FROM generate_series(1, %s)",
                (queue, count),
            )
        if limited:
            pgbeat.configure_queue(conn, "limited", rate=rate)
        conn.execute("VACUUM ANALYZE jobs")
    counts = Counter[str]()
    lock = threading.Lock()
    registry = pgbeat.Registry()

    @registry.handler("noop")
    def noop(payload: Any, job: pgbeat.JobContext) -> None:
        with lock:
            counts[job.queue] += 1

    settings = pgbeat.WorkerSettings(concurrency=100, claim_batch=100, heartbeat=False)
    worker = pgbeat.Worker(url, registry, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(1.0)  # warm-up: the first window, connections, plans
    with lock:
        before = Counter(counts)
    time.sleep(seconds)
    with lock:
        after = Counter(counts)
    worker.stop()
    thread.join(60)
    if after["other"] >= OTHER_JOBS:
        raise RuntimeError("the unlimited queue ran dry during the measurement")
    return {
        "other_per_s": (after["other"] - before["other"]) / seconds,
        "limited_per_s": (after["limited"] - before["limited"]) / seconds,
    }


def child_priority(url: str, backlog: int, samples: int) -> dict[str, Any]:
    """A high-priority job's wait behind ``backlog`` due low-priority 20 ms jobs, every slot
    busy: from enqueue to start, and from the first slot freed after its enqueue."""
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at) "
            "SELECT 'low', '{}', now() - interval '1 minute' FROM generate_series(1, %s)",
            (backlog,),
        )
        conn.execute("VACUUM ANALYZE jobs")
    ends: list[float] = []
    starts: dict[int, float] = {}
    lock = threading.Lock()
    registry = pgbeat.Registry()

    @registry.handler("low")
    def low(payload: Any) -> None:
        time.sleep(0.02)
        with lock:
            ends.append(time.monotonic())

    @registry.handler("high")
    def high(payload: Any, job: pgbeat.JobContext) -> None:
        with lock:
            starts[job.id] = time.monotonic()

    settings = pgbeat.WorkerSettings(concurrency=20, claim_batch=20, heartbeat=False)
    worker = pgbeat.Worker(url, registry, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(1.0)
    waits: list[float] = []
    from_free: list[float] = []
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(samples):
            enqueued = time.monotonic()
            job_id = pgbeat.enqueue(conn, "high", priority=10)
            assert job_id is not None
            deadline = enqueued + 10
            while job_id not in starts and time.monotonic() < deadline:
                time.sleep(0.001)
            with lock:
                started = starts.get(job_id)
                freed = [end for end in ends if end >= enqueued]
            if started is not None:
                waits.append(started - enqueued)
                first_free = min(freed) if freed else enqueued
                from_free.append(max(0.0, started - first_free))
            time.sleep(0.05)
    worker.stop()
    thread.join(60)
    return {"enqueue_to_start": waits, "slot_free_to_start": from_free}


def plant_fairness(conn: psycopg.Connection[Any], backlog: int, fair: bool) -> None:
    """Queue "tenants" (concurrency 50, ``fair`` or not) with key A's ``backlog`` of due
    jobs of kind "a", analyzed."""
    pgbeat.apply_migrations(conn)
    pgbeat.configure_queue(conn, "tenants", concurrency=50, fair=fair)
    conn.execute(
        "INSERT INTO jobs (kind, payload, queue, limit_key, run_at) SELECT 'a', '{}',"
        " 'tenants', 'A', now() - interval '1 minute' FROM generate_series(1, %s)",
        (backlog,),
    )
    conn.execute("VACUUM ANALYZE jobs")


def child_fairness(url: str, backlog: int, samples: int, fair: bool) -> dict[str, Any]:
    """Seconds from enqueue to start of key B's jobs, one every 20 ms, in a queue with
    concurrency 50 where key A's ``backlog`` of 20 ms jobs was enqueued first."""
    with psycopg.connect(url, autocommit=True) as conn:
        plant_fairness(conn, backlog, fair)
    starts: dict[int, float] = {}
    lock = threading.Lock()
    registry = pgbeat.Registry()

    @registry.handler("a")
    def a(payload: Any) -> None:
        time.sleep(0.02)

    @registry.handler("b")
    def b(payload: Any, job: pgbeat.JobContext) -> None:
        with lock:
            starts[job.id] = time.monotonic()
        time.sleep(0.02)

    settings = pgbeat.WorkerSettings(concurrency=50, claim_batch=50, heartbeat=False)
    worker = pgbeat.Worker(url, registry, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(1.0)
    enqueued: dict[int, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(samples):
            job_id = pgbeat.enqueue(conn, "b", queue="tenants", limit_key="B")
            assert job_id is not None
            enqueued[job_id] = time.monotonic()
            time.sleep(0.02)
    deadline = time.monotonic() + 120
    while len(starts) < samples and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.stop()
    thread.join(60)
    with lock:
        waits = [starts[i] - at if i in starts else 120.0 for i, at in enqueued.items()]
    return {"waits": waits}


def child_plan(url: str, rows: int) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the claim over ``rows`` pending jobs (rolled back)."""
    from pgbeat.db.sql.jobs import claim as claim_sql

    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        conn.execute(
            "INSERT INTO jobs (kind, payload, run_at, priority) "
            "SELECT 'noop', '{}', now() - interval '1 minute' * mod(i, 1000), mod(i, 7)::smallint "
            "FROM generate_series(1, %s) AS i",
            (rows,),
        )
        conn.execute("VACUUM ANALYZE jobs")
        params = {"limit": 100, "lease": "5 minutes", "kinds": None, "queues": None, "held": []}
        with conn.transaction(force_rollback=True):
            found = conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + claim_sql.JOBS_CLAIM, params)
            plan = [row[0] for row in found.fetchall()]
    return {"rows": rows, "plan": plan, "sort": any("Sort" in line for line in plan)}


def child_claim_buffers(url: str, jobs: int, distinct: bool = False) -> dict[str, Any]:
    """Shared buffers the fast claim touches per job claimed, draining ``jobs`` serially.

    A count, not a time: steady where the drain's seconds are noisy. Each claim of 100 runs
    under EXPLAIN (ANALYZE, BUFFERS), which executes and commits it, and the claimed jobs
    are marked done by a plain statement (not counted), as a worker would end them.
    """
    try:  # this revision's home of the statement, or the one before flow control
        from pgbeat.db.sql.jobs.claim import JOBS_CLAIM as claim
    except ImportError:
        from pgbeat.db.queries import JOBS_CLAIM as claim  # type: ignore[import-not-found, no-redef]
    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        enqueue_noops(conn, jobs, 0, distinct)
        conn.execute("VACUUM ANALYZE jobs")
        params = {"limit": 100, "lease": "5 minutes", "kinds": ["noop"]}
        buffers = claimed = 0
        while claimed < jobs:
            plan = [row[0] for row in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + claim, params)]
            top = next(line for line in plan if "Buffers:" in line)
            buffers += int(top.split("hit=")[1].split()[0])
            done = conn.execute(
                "UPDATE jobs SET status = 'done', locked_until = NULL, finished_at = now()"
                " WHERE status = 'running'"
            )
            if done.rowcount == 0:
                break
            claimed += done.rowcount
    return {"jobs": claimed, "buffers_per_job": buffers / max(claimed, 1)}


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "claim_buffers": child_claim_buffers,
    "drain": child_drain,
    "rate": child_rate,
    "priority": child_priority,
    "plan": child_plan,
    "fairness": child_fairness,
}


# -- the parent -----------------------------------------------------------------------------


def run_child(src: Path, admin: str, mode: str, **kwargs: Any) -> dict[str, Any]:
    """One child on a fresh database, importing pgbeat from ``src``."""
    with database.fresh_database(admin, f"flow_{mode}") as url:
        env = machine.revision_env(src)
        command = [sys.executable, "-m", "bench.flow_bench", "--child", mode, "--url", url]
        command += ["--kwargs", json.dumps(kwargs)]
        done = subprocess.run(
            command, env=env, cwd=REPO_ROOT, capture_output=True, text=True,
            timeout=CHILD_TIMEOUT, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{mode} child failed: {done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.flow_bench", description=__doc__)
    parser.add_argument("--child", choices=sorted(CHILDREN))
    parser.add_argument("--url")
    parser.add_argument("--kwargs", default="{}")
    parser.add_argument("--base-src", type=Path, help="another revision's src/ to compare")
    parser.add_argument("--src", type=Path, default=REPO_ROOT / "src", help="this revision's")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument(
        "--distinct", action="store_true", help="the A/B's jobs each with a run_at of its own"
    )
    parser.add_argument(
        "--ab-key-concurrency",
        type=int,
        help="the A/B's jobs over 500 limit keys of a queue with this key_concurrency",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rate", default="500/1s")
    parser.add_argument("--backlog", type=int, default=200_000)
    parser.add_argument("--plan-rows", type=int, default=1_000_000)
    parser.add_argument("--only", default="ab,keys,rate,priority,plan,shapes,fair")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="the shapes rows to run")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(CHILDREN[args.child](args.url, **json.loads(args.kwargs))))
        return 0
    return measure(args)


def measure(args: argparse.Namespace) -> int:
    admin = database.admin_url()
    here = args.src
    only = set(args.only.split(","))
    report: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(),
        "command": ["python", "-m", "bench.flow_bench", *sys.argv[1:]],
        "revision": machine.source_revision(REPO_ROOT),
        "load_average_1m_at_start": machine.load(),
    }
    drain = {"jobs": args.jobs, "keys": 0, "key_concurrency": None}
    ab = {**drain, "distinct": args.distinct}
    if args.ab_key_concurrency is not None:
        ab.update(keys=500, key_concurrency=args.ab_key_concurrency)
    if "ab" in only and args.base_src:
        runs: dict[str, list[float]] = {"this": [], "base": []}
        sides = (("base", args.base_src), ("this", here))
        for repeat in range(args.repeat):  # alternated, so drift of the machine hits both,
            # and each side first in half of the pairs: the first of a pair ran faster
            for name, src in sides if repeat % 2 == 0 else sides[::-1]:
                runs[name].append(run_child(src, admin, "drain", **ab)["seconds"])
                print(f"drain {name}: {runs[name][-1]:.2f}s", file=sys.stderr)
        this, base = statistics.median(runs["this"]), statistics.median(runs["base"])
        buffers = {  # the fast claim's: none of a key-limited queue's claims
            side: run_child(src, admin, "claim_buffers", jobs=args.jobs, distinct=args.distinct)[
                "buffers_per_job"
            ]
            for side, src in (("base", args.base_src), ("this", here))
            if args.ab_key_concurrency is None
        }
        row = "unlimited_drain" if args.ab_key_concurrency is None else "key_limited_drain"
        report[row] = {
            "run_at": "one per job" if args.distinct else "one per 1,000-job statement",
            "key_concurrency": args.ab_key_concurrency,
            "claim_buffers_per_job": {side: round(n, 2) for side, n in buffers.items()},
            "jobs": args.jobs,
            "this_jobs_per_s": round(args.jobs / this),
            "base_jobs_per_s": round(args.jobs / base),
            "ratio": round(base / this, 3),
            "paired_ratio_median": round(
                statistics.median(b / t for b, t in zip(runs["base"], runs["this"], strict=True)),
                3,
            ),
            "runs_s": runs,
        }
    if "keys" in only:
        runs = {"unlimited": [], "key_concurrency_1": []}
        for _ in range(args.repeat):
            for name, limit in (("unlimited", None), ("key_concurrency_1", 1)):
                keyed = {**drain, "keys": 500, "key_concurrency": limit}
                runs[name].append(run_child(here, admin, "drain", **keyed)["seconds"])
                print(f"keys {name}: {runs[name][-1]:.2f}s", file=sys.stderr)
        free, limited = (
            statistics.median(runs["unlimited"]),
            statistics.median(runs["key_concurrency_1"]),
        )
        report["key_concurrency_drain"] = {
            "jobs": args.jobs,
            "keys": 500,
            "unlimited_jobs_per_s": round(args.jobs / free),
            "key_concurrency_1_jobs_per_s": round(args.jobs / limited),
            "ratio": round(free / limited, 3),
            "paired_ratio_median": round(
                statistics.median(
                    f / k for f, k in zip(runs["unlimited"], runs["key_concurrency_1"], strict=True)
                ),
                3,
            ),
            "runs_s": runs,
        }
    if "rate" in only:
        pairs = []
        for _ in range(max(1, args.repeat // 2)):  # alone and beside, alternated
            alone = run_child(here, admin, "rate", rate=args.rate, seconds=5.0, limited=False)
            beside = run_child(here, admin, "rate", rate=args.rate, seconds=5.0, limited=True)
            print(f"rate alone {alone['other_per_s']:.0f}/s, beside {beside['other_per_s']:.0f}/s")
            pairs.append((alone, beside))
        allowed = _per_second(args.rate)
        limited = statistics.median(b["limited_per_s"] for _, b in pairs)
        report["rate_limited_queue"] = {
            "rate": args.rate,
            "pairs": len(pairs),
            "limited_per_s": round(limited, 1),
            "of_allowed": round(limited / allowed, 3),
            "other_alone_per_s": round(statistics.median(a["other_per_s"] for a, _ in pairs)),
            "other_beside_per_s": round(statistics.median(b["other_per_s"] for _, b in pairs)),
            "other_kept_paired_median": round(
                statistics.median(b["other_per_s"] / a["other_per_s"] for a, b in pairs), 3
            ),
        }
    if "priority" in only:
        found = run_child(here, admin, "priority", backlog=args.backlog, samples=60)
        waits, free = found["enqueue_to_start"], found["slot_free_to_start"]
        report["priority_wait_ms"] = {
            "backlog": args.backlog,
            "samples": len(waits),
            "enqueue_to_start_p50": round(1000 * percentile(waits, 0.5), 1),
            "enqueue_to_start_p99": round(1000 * percentile(waits, 0.99), 1),
            "slot_free_to_start_p50": round(1000 * percentile(free, 0.5), 1),
            "slot_free_to_start_p99": round(1000 * percentile(free, 0.99), 1),
        }
    if "shapes" in only:
        report["beside_shapes"] = measure_shapes(args, admin, here)
    if "fair" in only:
        report["fairness"] = measure_fairness(args, admin, here)
    if "plan" in only:
        try:
            report["claim_plan"] = run_child(here, admin, "plan", rows=args.plan_rows)
        except RuntimeError as exc:  # keep what was measured before
            report["claim_plan"] = {"error": str(exc)[-500:]}
    save_report(report, "flow", args.output)
    return 0


def shape_rows(
    shapes: str, sources: list[tuple[str, Path]], repeat: int, drain: Callable[[Path, str], float]
) -> dict[str, Any]:
    """Per shape and revision: ``drain(src, beside)`` jobs/s alone (beside "") and beside
    the shape, alternated run by run, with the median paired ratio."""
    found: dict[str, Any] = {}
    for shape in shapes.split(","):
        row: dict[str, Any] = {}
        for side, src in sources:
            pairs = []
            for _ in range(repeat):
                alone, beside = drain(src, ""), drain(src, shape)
                print(f"{shape} {side}: alone {alone:.0f}/s beside {beside:.0f}/s", file=sys.stderr)
                pairs.append((alone, beside))
            row[side] = {
                "alone_jobs_per_s": round(statistics.median(a for a, _ in pairs)),
                "beside_jobs_per_s": round(statistics.median(b for _, b in pairs)),
                "paired_ratio_median": round(statistics.median(b / a for a, b in pairs), 3),
            }
        found[shape] = row
    return found


def measure_shapes(args: argparse.Namespace, admin: str, here: Path) -> dict[str, Any]:
    """One worker x 10 slots draining --jobs default-queue jobs beside each shape, against
    the same drain alone, alternated run by run (and the same with --base-src if given)."""
    sources = [("this", here)] + ([("base", args.base_src)] if args.base_src else [])
    drain = {"jobs": args.jobs, "keys": 0, "key_concurrency": None, "slots": 10}
    drain["max_seconds"] = SHAPE_SECONDS  # the base may crawl beside a shape

    def one(src: Path, beside: str) -> float:
        return float(run_child(src, admin, "drain", **drain, beside=beside)["jobs_per_s"])

    return shape_rows(args.shapes, sources, args.repeat, one)


def measure_fairness(args: argparse.Namespace, admin: str, here: Path) -> dict[str, Any]:
    """Key B's jobs' start beside key A's backlog, with and without ``fair``, and with the
    queue otherwise empty (one worker x 50 slots, the queue's concurrency 50)."""
    found: dict[str, Any] = {}
    modes = (("empty", 0, True), ("not_fair", 20_000, False), ("fair", 20_000, True))
    for name, backlog, fair in modes:
        waits = run_child(here, admin, "fairness", backlog=backlog, samples=200, fair=fair)
        found[name] = {
            "backlog": backlog,
            "b_start_p50_ms": round(1000 * percentile(waits["waits"], 0.5), 1),
            "b_start_p99_ms": round(1000 * percentile(waits["waits"], 0.99), 1),
            "samples": len(waits["waits"]),
        }
    return found


def _per_second(rate: str) -> float:
    from pgbeat.flow import parse_rate

    parsed = parse_rate(rate)
    return parsed.count / parsed.period.total_seconds()


if __name__ == "__main__":
    sys.exit(main())
