"""A scheduler process's start, timed from its launch to its periods in the table.

``python -m bench.scheduler_starts``: 10,000 ``every = "1m"`` schedules in a schedules
file, and ``pgbeat scheduler --schedules FILE`` run as a user runs it (a process of its
own, the CLI, its own connections). ``cold``: a new database (migrated), so the first
process writes the file into the table, loads it and enqueues every schedule's latest
period. ``restart``: that process stopped; a new one launched 2 s after the next minute
begins, as a restart that finds that minute's 10,000 periods due. Each is timed from the
launch until the last of its periods' jobs is visible, three times (``--repeats``); the
restarts wait for their minute (up to a minute each). ``--baseline DIR`` measures the
pgbeat of another checkout the same way first (``git worktree add /tmp/base REV``).
Results: a line each on stderr, JSON on stdout. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import psycopg

from bench import database, machine

KIND = "heartbeat"
DEADLINE = timedelta(seconds=120)  # a start slower than this is reported as a failure


def schedules_file(directory: Path, count: int) -> Path:
    path = directory / "schedules.toml"
    lines = [f'[schedules.beat_{n}]\nkind = "{KIND}"\nevery = "1m"\n' for n in range(count)]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def launch(src: Path, url: str, schedules: Path, log: IO[bytes]) -> subprocess.Popen[bytes]:
    """``pgbeat scheduler``, its log to a file (a pipe nobody reads would fill, 10,000 lines
    of "enqueued", and stop it)."""
    command = [sys.executable, "-m", "pgbeat", "scheduler", "--schedules", str(schedules)]
    command += ["--database-url", url]
    env = machine.revision_env(src)
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=log)


def visible(url: str, since: datetime, count: int, launched: float) -> float:
    """Seconds from ``launched`` (``time.time()``) until ``count`` jobs of periods that fire
    at or after ``since`` are visible: counted at each notification of new jobs and every
    200 ms besides (a tighter poll would take a core from what it measures)."""
    query = "SELECT count(*) FROM jobs WHERE kind = %s AND run_at >= %s"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("LISTEN pgbeat_jobs")
        while True:
            seen = conn.execute(query, (KIND, since)).fetchone()
            assert seen is not None
            if seen[0] >= count:
                return time.time() - launched
            if time.time() - launched > DEADLINE.total_seconds():
                raise RuntimeError(f"only {seen[0]} of {count} periods after {DEADLINE}")
            for _ in conn.notifies(timeout=0.2, stop_after=1):
                pass


def stop(process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.returncode not in (0, -signal.SIGTERM):
        log.seek(0)
        error = log.read().decode(errors="replace")[-500:]
        raise RuntimeError(f"the scheduler exited {process.returncode}: {error}")


def timed_start(src: Path, url: str, schedules: Path, since: datetime, count: int) -> int:
    """Milliseconds from a scheduler's launch until ``count`` periods since ``since`` are
    visible; the process is stopped after."""
    with tempfile.TemporaryFile() as log:
        launched = time.time()
        process = launch(src, url, schedules, log)
        try:
            return round(visible(url, since, count, launched) * 1000)
        finally:
            stop(process, log)


def database_now(url: str) -> datetime:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def one_revision(src: Path, count: int, repeats: int) -> dict[str, list[float]]:
    """Cold starts and restarts of the pgbeat in ``src``, each cold start in a new database."""
    env = machine.revision_env(src)
    cold: list[float] = []
    restarts: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        schedules = schedules_file(Path(directory), count)
        for attempt in range(repeats):
            with database.fresh_database(database.admin_url(), "starts") as url:
                migrate = [sys.executable, "-m", "pgbeat", "migrate", "--database-url", url]
                subprocess.run(migrate, env=env, check=True, capture_output=True)
                since = database_now(url) - timedelta(minutes=2)
                cold.append(timed_start(src, url, schedules, since, count))
                if attempt == 0:  # the restarts, on this database
                    for _ in range(repeats):
                        now = database_now(url)
                        minute = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
                        time.sleep((minute - now).total_seconds() + 2)
                        restarts.append(timed_start(src, url, schedules, minute, count))
    return {"cold_ms": cold, "restart_ms": restarts}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", metavar="DIR", help="also the pgbeat of this checkout")
    args = parser.parse_args()
    figures: dict[str, Any] = {"schedules": args.schedules}
    if args.baseline:
        figures["baseline"] = one_revision(
            Path(args.baseline) / "src", args.schedules, args.repeats
        )
        print(f"[scheduler_starts] baseline: {figures['baseline']}", file=sys.stderr)
    src = Path(__file__).resolve().parent.parent / "src"
    figures.update(one_revision(src, args.schedules, args.repeats))
    print(
        f"[scheduler_starts] now: cold {figures['cold_ms']} ms, restart "
        f"{figures['restart_ms']} ms (from the launch)",
        file=sys.stderr,
    )
    figures["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
