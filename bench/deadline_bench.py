"""What deadlines cost a scheduler: the tick of 10,000 schedules with a deadline against the
same 10,000 without (A/B in one run), and the judging of 10,000 periods that fall due at once.

``python -m bench.deadline_bench [--schedules 10000] [--rounds 12]``

Two databases, migrated alike, each with the same schedules (``every = "1m"``, created from
code); in B every one has ``deadline = "2h"`` and ``on_late``. One ``Scheduler`` per
database runs in this process (no heartbeat) and is ticked by hand at successive whole
minutes (``tick(conn, now)``, as the loop does, with the next tick's periods planned ahead
in between, as the loop does while it waits): each tick claims 10,000 new periods. The
rounds alternate which database ticks first. Reported: each tick's time, the median of
each side and the median of the paired ratios B / A. Then B's periods of the first minute
fall due: one replica judges all 10,000 (all late: nothing ran them), inserting 10,000
alert jobs. Results: a table on stderr, JSON on stdout. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

import pgbeat
from bench import database
from pgbeat.scheduling import deadlines, planning
from pgbeat.scheduling.definition import schedule_values
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.scheduler import Scheduler

COPY_SCHEDULES = (
    "COPY pgbeat_schedules (name, source, kind, every, definition_hash, deadline, on_late)"
    " FROM STDIN"
)
MINUTE = timedelta(minutes=1)


def log(message: str) -> None:
    print(f"[deadline_bench] {message}", file=sys.stderr, flush=True)


def insert_schedules(url: str, count: int, with_deadline: bool) -> None:
    """``count`` schedules firing every minute, written as from code (COPY)."""
    extra: dict[str, Any] = {"deadline": "2h", "on_late": "alert"} if with_deadline else {}
    with psycopg.connect(url, autocommit=True) as conn, conn.cursor() as cursor:
        with cursor.copy(COPY_SCHEDULES) as copy:
            for n in range(count):
                schedule = Schedule.model_validate(
                    {"name": f"s{n:06d}", "kind": "noop", "every": "1m", **extra}
                )
                values = schedule_values(schedule)
                copy.write_row(
                    [
                        values["name"],
                        "api",
                        "noop",
                        values["every"],
                        values["definition_hash"],
                        values["deadline"],
                        values["on_late"],
                    ]
                )
        cursor.execute("ANALYZE pgbeat_schedules")


class Side:
    """One database and its scheduler, ticked by hand."""

    def __init__(self, url: str, label: str) -> None:
        self.label = label
        self.conn = psycopg.connect(url, autocommit=True)
        self.scheduler = Scheduler(url, None, heartbeat=False)
        self.ticks: list[float] = []

    def tick(self, at: datetime, record: bool) -> int:
        started = time.perf_counter()
        result = self.scheduler.tick(self.conn, at)
        spent = time.perf_counter() - started
        if record:
            self.ticks.append(spent * 1000)
        # as the loop does while it waits: the next fire's periods planned ahead
        self.scheduler._prepared = planning.plan_ahead(
            self.scheduler.catalog, result.next_fire, at, self.scheduler.replica, None
        )
        return len(result.inserted)


def run(admin: str, count: int, rounds: int) -> dict[str, Any]:
    with (
        database.fresh_database(admin, "deadline_a") as url_a,
        database.fresh_database(admin, "deadline_b") as url_b,
    ):
        for url, with_deadline in ((url_a, False), (url_b, True)):
            with psycopg.connect(url, autocommit=True) as conn:
                pgbeat.apply_migrations(conn)
            insert_schedules(url, count, with_deadline)
        a, b = Side(url_a, "without"), Side(url_b, "with deadlines")
        row = a.conn.execute("SELECT date_trunc('minute', now()) + interval '1 minute'").fetchone()
        assert row is not None
        first: datetime = row[0]
        for n in range(rounds + 1):  # the first round warms up (catalog load), not recorded
            at = first + n * MINUTE
            order = (a, b) if n % 2 else (b, a)
            for side in order:
                claimed = side.tick(at, record=n > 0)
                assert claimed == count, (side.label, claimed)
            if n:
                log(f"round {n}: without {a.ticks[-1]:.0f} ms, with {b.ticks[-1]:.0f} ms")
        ratios = [with_ / without for with_, without in zip(b.ticks, a.ticks, strict=True)]
        started = time.perf_counter()
        judged = deadlines.judge(b.conn, first + timedelta(hours=2), batch=count)
        judging = (time.perf_counter() - started) * 1000
        assert len(judged.late) == count, len(judged.late)
        for side in (a, b):
            side.conn.close()
        return {
            "schedules": count,
            "rounds": rounds,
            "tick_ms_without": [round(t, 1) for t in a.ticks],
            "tick_ms_with": [round(t, 1) for t in b.ticks],
            "median_ms_without": round(statistics.median(a.ticks), 1),
            "median_ms_with": round(statistics.median(b.ticks), 1),
            "median_ratio": round(statistics.median(ratios), 3),
            "judge_ms_10000_late": round(judging, 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    figures = run(database.admin_url(), args.schedules, args.rounds)
    figures["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    log(
        f"median tick: without {figures['median_ms_without']} ms, with "
        f"{figures['median_ms_with']} ms, ratio {figures['median_ratio']}; judging "
        f"{args.schedules} late periods: {figures['judge_ms_10000_late']} ms"
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
