"""The hour-long soak: >= 2,000 jobs/s through real worker processes, the scheduler firing
too, on a server of its own with autovacuum on, as production runs it.

    python -m bench.soak_hour                       # the hour (about 62 minutes)
    python -m bench.soak_hour --minutes 3 --sample-seconds 15 --label "short-run sample"

Every sample (a minute by default) it records the jobs table's heap and index size, the
pickup lag of the jobs finished since the previous sample (``finished_at - run_at``: due to
done, so the claim's wait is in it; p50 and p99), the RSS of every process, throughput and
backlog, into ``docs/img/<name>.csv``, and plots them to ``docs/img/<name>.png``; at the
end, still under load, it times the dashboard's main pages (``<name>-dashboard.csv``).
Retention runs with a short window (``--retention``, 2 minutes) so that an hour reaches the steady
state a 7-day window reaches in a week. The verdict compares the last sample with the one
at a sixth of the run (minute 10 of 60): size within 15 %, lag p99 within 10 %, RSS flat.
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import psycopg

import pgbeat
from bench import database

ROOT = Path(__file__).resolve().parents[1]
IMG = ROOT / "docs" / "img"
SERVER_DIR = ROOT / "bench" / ".pgserver-soak"
APP = "bench.noop_app:registry"
SIZE_LIMIT, LAG_LIMIT, RSS_LIMIT = 0.15, 0.10, 0.15  # the verdict's tolerances
DASHBOARD_LIMIT_MS = 300.0

# The jobs table's heap and indexes, in bytes.
SIZES = "SELECT pg_table_size('jobs'), pg_indexes_size('jobs'), now()"
# Jobs finished in [since, until): count, pickup lag p50 and p99 in ms (jobs_finished).
LAG = """
SELECT count(*),
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - run_at)),
       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - run_at))
FROM jobs WHERE finished_at >= %(since)s AND finished_at < %(until)s"""
# Backlog (jobs_ready), dead tuples and autovacuum runs of jobs so far.
STATE = """
SELECT (SELECT count(*) FROM jobs WHERE status = 'pending' AND run_at <= now()),
       n_dead_tup, autovacuum_count, coalesce(
           (SELECT total_deleted FROM pgbeat_retention), 0)
FROM pg_stat_user_tables WHERE relname = 'jobs'"""


def own_server() -> str:
    """An embedded server (pgserver) of the soak's own, with autovacuum on."""
    url = database.embedded_url(SERVER_DIR)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET autovacuum = on")
        conn.execute("ALTER SYSTEM SET max_connections = 100")
        conn.execute("SELECT pg_reload_conf()")
    return url


def schedules_file(directory: Path, count: int) -> Path:
    """``count`` schedules firing every second; each period's job is kept a minute."""
    path = directory / "schedules.toml"
    path.write_text(
        "".join(
            f'[schedules.soak_{i}]\nevery = "1s"\nkind = "noop"\ncatch_up_window = "1m"\n\n'
            for i in range(count)
        )
    )
    return path


def produce(url: str, rate: float, stop: threading.Event) -> None:
    """Enqueue about ``rate`` jobs a second, ten bulk statements a second, until ``stop``."""
    chunk = max(1, round(rate / 10))
    with psycopg.connect(url, autocommit=True) as conn:
        sent, started = 0, time.monotonic()
        while not stop.is_set():
            pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop") for _ in range(chunk)])
            sent += chunk
            ahead = sent / rate - (time.monotonic() - started)
            if ahead > 0:
                stop.wait(ahead)


def processes(
    worker: psutil.Process, scheduler: psutil.Process, supervised: bool
) -> dict[str, psutil.Process]:
    """The soak's processes by name: the supervisor, its workers (by age), the scheduler."""
    if not supervised:  # `pgbeat worker` without --processes N is the worker itself
        return {"worker_1": worker, "scheduler": scheduler}
    workers = sorted(worker.children(), key=lambda p: p.create_time())
    found = {"supervisor": worker, "scheduler": scheduler}
    found.update({f"worker_{i + 1}": p for i, p in enumerate(workers)})
    return found


def rss(named: dict[str, psutil.Process]) -> dict[str, float]:
    values = {}
    for name, process in named.items():
        try:
            values[f"rss_{name}_mb"] = round(process.memory_info().rss / 2**20, 1)
        except psutil.Error:
            values[f"rss_{name}_mb"] = float("nan")
    return values


def sample(
    conn: psycopg.Connection[Any], since: datetime, started: float, named: dict[str, Any]
) -> tuple[dict[str, Any], datetime]:
    heap, index, until = conn.execute(SIZES).fetchone() or (0, 0, since)
    done, p50, p99 = conn.execute(LAG, {"since": since, "until": until}).fetchone() or (0, 0, 0)
    backlog, dead, autovacuums, deleted = conn.execute(STATE).fetchone() or (0, 0, 0, 0)
    seconds = (until - since).total_seconds()
    row = {
        "minute": round((time.monotonic() - started) / 60, 2),
        "jobs_per_s": round(done / seconds) if seconds else 0,
        "heap_mb": round(heap / 2**20, 1),
        "index_mb": round(index / 2**20, 1),
        "lag_p50_ms": round((p50 or 0) * 1000, 1),
        "lag_p99_ms": round((p99 or 0) * 1000, 1),
        "backlog": backlog,
        "dead_tuples": dead,
        "autovacuums": autovacuums,
        "retention_deleted": deleted,
        **rss(named),
    }
    return row, until


def wait_until_registered(
    url: str, workers: int, started: tuple[subprocess.Popen[bytes], ...]
) -> None:
    """The clock starts once every worker and the scheduler have registered their heartbeat:
    on a loaded machine their start (imports, migrations check) can take longer than a short
    soak, which then measured nothing."""
    deadline = time.monotonic() + 300
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            if any(process.poll() is not None for process in started):
                raise RuntimeError("a worker or the scheduler exited before it registered")
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE role = 'worker'),"
                " count(*) FILTER (WHERE role = 'scheduler') FROM pgbeat_processes"
            ).fetchone()
            if row is not None and row[0] >= workers and row[1] >= 1:
                return
            time.sleep(0.1)
    raise RuntimeError("the workers and the scheduler did not register within 300 s")


def run(args: argparse.Namespace, admin: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    csv_path = args.output_dir / f"{args.name}.csv"
    with database.fresh_database(admin, "soak_hour") as url, tempfile.TemporaryDirectory() as tmp:
        with psycopg.connect(url, autocommit=True) as conn:
            pgbeat.apply_migrations(conn)
            autovacuum = conn.execute("SHOW autovacuum").fetchone()
        print(f"soak: autovacuum {autovacuum[0] if autovacuum else '?'}", file=sys.stderr)
        env = {**os.environ, "DATABASE_URL": url}
        pgbeat_cli = [sys.executable, "-m", "pgbeat"]
        retention = ["--retention", args.retention, "--failed-retention", args.retention]
        worker = subprocess.Popen(
            [*pgbeat_cli, "worker", APP, "--processes", str(args.processes),
             "--concurrency", str(args.concurrency), *retention,
             "--retention-every", "10s", "--log-level", "WARNING"],
            env=env, cwd=ROOT,
        )  # fmt: skip
        schedules = schedules_file(Path(tmp), args.schedules)
        scheduler = subprocess.Popen(
            [*pgbeat_cli, "scheduler", "--schedules", str(schedules), "--log-level", "WARNING"],
            env=env, cwd=ROOT,
        )  # fmt: skip
        stop = threading.Event()
        producer = threading.Thread(target=produce, args=(url, args.rate, stop), daemon=True)
        try:
            supervisor = psutil.Process(worker.pid)
            supervised = args.processes > 1
            wait_until_registered(url, args.processes, (worker, scheduler))
            named = processes(supervisor, psutil.Process(scheduler.pid), supervised)
            started = time.monotonic()
            producer.start()
            with psycopg.connect(url, autocommit=True) as conn:
                since = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
                end = started + args.minutes * 60
                while time.monotonic() < end:
                    stop.wait(min(args.sample_seconds, max(0.0, end - time.monotonic())))
                    if worker.poll() is not None or scheduler.poll() is not None:
                        raise RuntimeError("a worker or the scheduler exited during the soak")
                    row, since = sample(conn, since, started, named)
                    rows.append(row)
                    write_csv(csv_path, rows)
                    print(f"soak: {row}", file=sys.stderr, flush=True)
            # the dashboard at the soak's end, under its load
            pages = dashboard_times(url, schedules, args.schedules)
            write_csv(args.output_dir / f"{args.name}-dashboard.csv", pages)
        finally:
            stop.set()
            producer.join(10)
            for process in (worker, scheduler):
                process.send_signal(signal.SIGTERM)
            for process in (worker, scheduler):
                process.wait(60)
    return rows


def dashboard_times(url: str, schedules: Path, count: int) -> list[dict[str, Any]]:
    """Median and worst server time of the dashboard's main pages, 5 requests each."""
    import httpx

    from bench.ui_bench import Server

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT max(id) FROM jobs").fetchone()
    newest = int(row[0]) if row and row[0] else 1
    paths = [
        "/", "/jobs", "/jobs?status=done", "/jobs?status=pending", "/jobs?status=running",
        "/jobs?kind=noop", f"/jobs/{newest}", "/failures?window=1h", "/processes",
        "/schedules", *(["/schedules/soak_0"] if count else []),
    ]  # fmt: skip
    found = []
    with Server(url, schedules) as base, httpx.Client(base_url=base, timeout=30) as client:
        client.get("/").raise_for_status()  # opens the pool
        for path in paths:
            times = []
            for _ in range(5):
                started = time.perf_counter()
                client.get(path).raise_for_status()
                times.append((time.perf_counter() - started) * 1000)
            times.sort()
            found.append(
                {"page": path, "median_ms": round(times[2], 1), "max_ms": round(times[-1], 1)}
            )
    return found


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def verdict(rows: list[dict[str, Any]], reference_minute: float) -> list[str]:
    """The last sample against the first one at or after ``reference_minute``."""
    reference = next((r for r in rows if r["minute"] >= reference_minute), rows[0])
    last = rows[-1]
    lines = [f"reference minute {reference['minute']}, last minute {last['minute']}"]

    def check(name: str, before: float, after: float, limit: float, growth: bool) -> None:
        # size must stay within the limit either way; a lag or an RSS may only not grow
        change = (after - before) / before if before else 0.0
        ok = change <= limit if growth else abs(change) <= limit
        lines.append(
            f"  {'ok  ' if ok else 'FAIL'} {name}: {before:g} -> {after:g} ({change:+.1%},"
            f" limit {limit:.0%})"
        )

    check("heap+index MB", reference["heap_mb"] + reference["index_mb"],
          last["heap_mb"] + last["index_mb"], SIZE_LIMIT, growth=False)  # fmt: skip
    check("lag p99 ms", reference["lag_p99_ms"], last["lag_p99_ms"], LAG_LIMIT, growth=True)
    for key in (k for k in last if k.startswith("rss_")):
        check(key, reference[key], last[key], RSS_LIMIT, growth=True)
    rate = sum(r["jobs_per_s"] for r in rows) / len(rows)
    lines.append(f"  mean throughput {rate:,.0f} jobs/s over {len(rows)} samples")
    return lines


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [r["minute"] for r in rows]
    figure, axes = plt.subplots(4, 1, figsize=(9, 11), sharex=True)
    panels: list[tuple[str, list[str]]] = [
        ("jobs table, MB", ["heap_mb", "index_mb"]),
        ("pickup lag (due -> done), ms", ["lag_p50_ms", "lag_p99_ms"]),
        ("RSS per process, MB", [k for k in rows[0] if k.startswith("rss_")]),
        ("jobs/s finished", ["jobs_per_s"]),
    ]
    for axis, (label, keys) in zip(axes, panels, strict=True):
        for key in keys:
            axis.plot(minutes, [r[key] for r in rows], marker=".", label=key)
        axis.set_ylabel(label)
        if keys[0].startswith("lag"):
            axis.set_yscale("log")  # the start's backlog would flatten the rest
        else:
            axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, loc="lower right")
    axes[-1].set_xlabel("minute")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak_hour",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=2_000.0, help="jobs enqueued per second")
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--schedules", type=int, default=20, help="schedules every 1s")
    parser.add_argument("--sample-seconds", type=float, default=60.0)
    parser.add_argument("--retention", default="2m", help="--retention of the workers")
    parser.add_argument("--name", default="soak-hour", help="docs/img/<name>.csv and .png")
    parser.add_argument("--output-dir", type=Path, default=IMG)
    parser.add_argument("--label", default="", help="said in the plot's title")
    parser.add_argument(
        "--reference-minute",
        type=float,
        help="the sample the last is compared with (default: a sixth of the run, minute 10)",
    )
    parser.add_argument(
        "--database-url", help="an administrative URL instead of the soak's own server"
    )
    args = parser.parse_args(argv)
    admin = args.database_url or own_server()
    rows = run(args, admin)
    pages_path = args.output_dir / f"{args.name}-dashboard.csv"
    if not rows:
        print("soak: no sample taken", file=sys.stderr)
        return 1
    title = (
        f"pgbeat soak: {args.minutes:g} min, {args.rate:,.0f} jobs/s offered, "
        f"{args.processes} workers + scheduler ({args.schedules} x 1s), autovacuum on"
        + (f"\n{args.label}" if args.label else "")
    )
    plot(rows, args.output_dir / f"{args.name}.png", title)
    reference = args.minutes / 6 if args.reference_minute is None else args.reference_minute
    print("\n".join(verdict(rows, reference)))
    with pages_path.open() as pages:
        slowest = max(csv.DictReader(pages), key=lambda r: float(r["median_ms"]))
    ok = float(slowest["median_ms"]) < DASHBOARD_LIMIT_MS
    print(
        f"  {'ok  ' if ok else 'FAIL'} dashboard at the end: slowest page {slowest['page']}"
        f" {slowest['median_ms']} ms median (limit {DASHBOARD_LIMIT_MS:g} ms)"
    )
    print(f"written {args.output_dir / args.name}.csv and .png", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
