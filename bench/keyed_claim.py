"""``python -m bench.keyed_claim``: what one worker's claims cost over 20,000 free keys
(issue 34, item 1), serially, in counts that do not depend on the machine's load as the
drains' seconds do.

Each measurement is a child process on a fresh database, importing pgbeat from its
revision (``--base-src`` for the other one, alternated): 20,000 no-op jobs over 20,000
limit keys of queue "keyed" (``key_concurrency = 1``, ``key_rate = 1/1h`` or no limit), one
``Claimer`` on a connection with the worker's settings claiming 100 at a time, each claim's
jobs marked done after the next claim (so 100-200 run at each claim, as in a drain), until
the backlog is gone. ``auto_explain`` on that connection (per-node timing off) sums the
claim statements' shared buffers and durations; the backend's CPU (``/proc``, so a server
on this machine) and the claims' wall time come beside them. Needs auto_explain (contrib):
the embedded server has none, so give DATABASE_URL. docs/flow-control.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

import pgbeat  # children: the revision their PYTHONPATH puts first
from bench import database, machine
from bench.report import save_report

REPO_ROOT = Path(__file__).resolve().parents[1]
LIMITS: dict[str, dict[str, Any]] = {
    "unlimited": {},
    "key_concurrency_1": {"key_concurrency": 1},
    "key_rate_1_per_1h": {"key_rate": "1/1h"},
}
EXPLAIN = {
    "log_min_duration": "0",
    "log_analyze": "on",
    "log_timing": "off",
    "log_buffers": "on",
    "log_level": "notice",
}
CLAIMS = ("UPDATE jobs", "WITH ")  # the plain claim and the limited ones begin so


def backend_cpu(pid: int) -> float:
    """Seconds of CPU the server process ``pid`` has used (user + system)."""
    return machine.process_cpu(pid)[1]


def child(url: str, jobs: int, limit: str, batch: int) -> dict[str, Any]:
    """Claim ``jobs`` keyed jobs ``batch`` at a time with one Claimer; the counts."""
    from pgbeat.db.pooler import session_options
    from pgbeat.worker.claiming import Claimer
    from pgbeat.worker.sessions import SESSION_SETTINGS

    with psycopg.connect(url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
        pgbeat.enqueue_many(
            conn,
            [pgbeat.NewJob("noop", {}, queue="keyed", limit_key=f"k{i}") for i in range(jobs)],
        )
        if LIMITS[limit]:
            pgbeat.configure_queue(conn, "keyed", **LIMITS[limit])
        conn.execute("VACUUM ANALYZE jobs")
    notices: list[str] = []
    options = session_options(url, SESSION_SETTINGS)
    claimer = Claimer(timedelta(minutes=5), kinds=["noop"])
    with (
        psycopg.connect(url, autocommit=True, options=options) as conn,
        psycopg.connect(url, autocommit=True) as other,
    ):
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for name, value in EXPLAIN.items():
            conn.execute(f"SET auto_explain.{name} = '{value}'")  # constants above
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        pid = int(row[0])
        walls: list[float] = []
        loop_cpu: list[float] = []  # the claiming thread's own CPU a claim (psycopg included)
        running: list[int] = []
        claimed = 0
        cpu = backend_cpu(pid)
        while claimed < jobs and len(walls) < 4 * jobs // batch:
            started, started_cpu = time.perf_counter(), time.thread_time()
            got = claimer.claim(conn, batch)
            walls.append(time.perf_counter() - started)
            loop_cpu.append(time.thread_time() - started_cpu)
            claimed += len(got)
            if running:
                other.execute(
                    "UPDATE jobs SET status = 'done', finished_at = now(), locked_until = NULL"
                    " WHERE id = ANY(%s)",
                    (running,),
                )
                claimer.slots_freed({"keyed": 0.0})
            running = [job.id for job in got]
        cpu = backend_cpu(pid) - cpu
    sums = {kind: [0, 0, 0.0] for kind in ("limited", "fast")}  # statements, buffers, ms
    for text in notices:
        if "Query Text" not in text or not any(m in text[:200] for m in CLAIMS):
            continue
        kind = "limited" if "pgbeat_queue_starts" in text else "fast"
        hit = re.search(r"Buffers: shared hit=(\d+)", text.split("\n", 2)[-1])
        took = re.search(r"duration: ([0-9.]+) ms", text)
        sums[kind][0] += 1
        sums[kind][1] += int(hit.group(1)) if hit else 0
        sums[kind][2] += float(took.group(1)) if took else 0.0
    found: dict[str, Any] = {"claimed": claimed, "claims": len(walls)}
    for kind, (count, buffers, took_ms) in sums.items():
        found[f"{kind}_statements"] = count
        found[f"{kind}_buffers_per_statement"] = round(buffers / max(count, 1))
        found[f"{kind}_statement_ms"] = round(took_ms, 1)
    return found | {
        "backend_cpu_s": round(cpu, 2),
        "claim_wall_median_ms": round(1000 * statistics.median(walls), 2),
        "claim_loop_cpu_median_us": round(1e6 * statistics.median(loop_cpu)),
    }


def run_child(src: Path, admin: str, **kwargs: Any) -> dict[str, Any]:
    """One child on a fresh database, importing pgbeat from ``src``."""
    with database.fresh_database(admin, "keyed_claim") as url:
        command = [sys.executable, "-m", "bench.keyed_claim", "--child", "--url", url]
        command += ["--kwargs", json.dumps(kwargs)]
        done = subprocess.run(
            command, env=machine.revision_env(src), cwd=REPO_ROOT, capture_output=True,
            text=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"child failed: {done.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.keyed_claim", description=__doc__)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--url")
    parser.add_argument("--kwargs", default="{}")
    parser.add_argument("--src", type=Path, default=REPO_ROOT / "src", help="this revision's")
    parser.add_argument("--base-src", type=Path, help="another revision's src/ to compare")
    parser.add_argument("--limits", default=",".join(LIMITS))
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.url, **json.loads(args.kwargs))))
        return 0
    admin = database.admin_url()
    sources = [("this", args.src)] + ([("base", args.base_src)] if args.base_src else [])
    report: dict[str, Any] = {
        "started_at": datetime.now(UTC).isoformat(),
        "command": ["python", "-m", "bench.keyed_claim", *sys.argv[1:]],
        "revision": machine.source_revision(REPO_ROOT),
        "load_average_1m_at_start": machine.load(),
        "runs": {},
    }
    for _ in range(args.repeat):
        for limit in args.limits.split(","):
            for side, src in sources:
                found = run_child(src, admin, jobs=args.jobs, limit=limit, batch=args.batch)
                report["runs"].setdefault(f"{side}_{limit}", []).append(found)
                print(f"{side} {limit}: {found}", file=sys.stderr)
    report["load_average_1m_at_end"] = machine.load()
    save_report(report, "keyed-claim")
    return 0


if __name__ == "__main__":
    sys.exit(main())
