"""The overview, failures and processes pages.

The overview runs six indexed queries: capped counts by state, the last hour per minute,
the last 24 hours per hour, the periods of every schedule's last fires, the processes
table, and the queues of the oldest due jobs (a few, never all of them). A live refresh
(``X-Pgbeat-Live``) skips the 24 hours, most of the page's database time: its chart is
outside the regions a refresh replaces.
"""

from __future__ import annotations

import heapq
from datetime import datetime, timedelta
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from pgbeat import flow
from pgbeat.db.guarded import one, rows
from pgbeat.db.sql import processes as process_sql
from pgbeat.db.sql import schedule_files as file_sql
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.db.sql.jobs import dashboard as dashboard_sql
from pgbeat.jobs import queues
from pgbeat.observe.fleet import read_fleet
from pgbeat.observe.liveness import STALE_AFTER, is_live
from pgbeat.scheduling.fires import fire_times_after
from pgbeat.ui import jobs_data, performance, schedule_data
from pgbeat.ui.context import Ui

WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7)}
FAILURES_SCANNED = 10_000
UP_NEXT = 10


def routes(ui: Ui) -> list[BaseRoute]:
    pages = Pages(ui)
    return [
        Route("/", pages.overview, methods=["GET"], name="overview"),
        Route("/failures", pages.failures, methods=["GET"], name="failures"),
        Route("/processes", pages.processes, methods=["GET"], name="processes"),
    ]


class Pages:
    def __init__(self, ui: Ui) -> None:
        self.ui = ui

    def overview(self, request: Request) -> Response:
        with self.ui.store.connection() as conn:
            entries = list(self.ui.schedules.load(conn).entries)[: schedule_data.PAGE]
            now, _ = jobs_data.clock(conn)
            counts = (
                one(conn, dashboard_sql.JOBS_OVERVIEW_COUNTS, {"cap": jobs_data.COUNT_CAP}) or {}
            )
            minutes = rows(conn, dashboard_sql.JOBS_FINISHED_PER_MINUTE)
            live = request.headers.get("x-pgbeat-live") == "1"
            hours = None if live else rows(conn, dashboard_sql.JOBS_FINISHED_PER_HOUR)
            views = schedule_data.views(conn, entries, now, strip=3)
            processes = _processes(rows(conn, process_sql.PROCESSES_ALL))
            oldest_queues = queues.oldest_due_queues(conn)
        health: dict[str, int] = {}
        for view in views:
            health[view.health] = health.get(view.health, 0) + 1
        return self.ui.render(
            request,
            "overview.html",
            nav="overview",
            now=now,
            counts=counts,
            cap=jobs_data.COUNT_CAP,
            minute_chart=performance.minute_chart(minutes, now),
            hour_chart=None if hours is None else performance.hour_chart(hours, now),
            health=health,
            up_next=_up_next(views, now),
            processes=processes,
            oldest_queues=oldest_queues,
            views=views,
            day_ago=now - timedelta(hours=24),
        )

    def failures(self, request: Request) -> Response:
        window = request.query_params.get("window", "24h")
        if window not in WINDOWS:
            raise HTTPException(400, "window: 1h, 24h or 7d")
        with self.ui.store.connection() as conn:
            now, _ = jobs_data.clock(conn)
            groups = rows(
                conn,
                dashboard_sql.JOBS_FAILURE_GROUPS,
                {"window": WINDOWS[window], "cap": FAILURES_SCANNED},
            )
        total = sum(int(g["failures"]) for g in groups)
        return self.ui.render(
            request,
            "failures.html",
            nav="failures",
            now=now,
            groups=groups,
            window=window,
            windows=list(WINDOWS),
            since=now - WINDOWS[window],
            total=total,
            capped=total >= FAILURES_SCANNED,
        )

    def processes(self, request: Request) -> Response:
        with self.ui.store.connection() as conn:
            now, _ = jobs_data.clock(conn)
            processes = _processes(rows(conn, process_sql.PROCESSES_ALL))
            files: dict[str, dict[str, Any]] = {}
            if _has_files(conn):
                files = {f["hash"]: f for f in rows(conn, file_sql.SCHEDULE_FILES_OF_PROCESSES)}
            fleet = read_fleet(conn)  # the verdicts, as `pgbeat status` gives them
        return self.ui.render(
            request,
            "processes.html",
            nav="processes",
            now=now,
            workers=[p for p in processes if p["role"] == "worker"],
            schedulers=[p for p in processes if p["role"] == "scheduler"],
            files=files,
            unserved=fleet.unserved,
            in_effect=next((f for f in files.values() if f["in_effect"]), None),
            drift=fleet.replicas_disagree,
            behind={r["id"] for r in fleet.replicas_behind},
            retention=fleet.retention,
            stale_after=STALE_AFTER.total_seconds(),
        )


def _has_files(conn: Any) -> bool:
    """Whether migration 0005 (schedules in the database, their files) is applied."""
    row = one(conn, schedule_sql.SCHEDULES_TABLE_EXISTS)
    return bool(row and next(iter(row.values())))


def _processes(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for process in found:
        process["live"] = is_live(timedelta(seconds=process["heartbeat_age_s"]))
        process["details"] = flow.worker_details(process["details"])
    return found


def _up_next(views: list[schedule_data.ScheduleView], now: datetime) -> list[tuple[datetime, Any]]:
    """The next fires across all schedules, soonest first (paused ones left out)."""
    candidates = [
        (fire, view.schedule.name, view)
        for view in views
        if not view.entry.paused
        for fire in fire_times_after(view.schedule, now, UP_NEXT)
    ]
    return [(fire, view) for fire, _, view in heapq.nsmallest(UP_NEXT, candidates)]
