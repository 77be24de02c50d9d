"""The schedules list and a schedule's page: next fires with DST notes, and period history.

Fire times are computed by the scheduler's own functions at the database's ``now``; the
history shows, for each period, the job its unique key names, or that it has none.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from pgbeat.ui import jobs_data, schedule_data, timeline
from pgbeat.ui.context import Ui

HISTORY_PAGE = 50
PERIOD_STATES = ("done", "failed", "running", "pending", "missed", "overdue", "skipped", "none")


def routes(ui: Ui) -> list[BaseRoute]:
    pages = SchedulePages(ui)
    return [
        Route("/schedules", pages.index, methods=["GET"], name="schedules"),
        Route("/schedules/{name}", pages.detail, methods=["GET"], name="schedule"),
    ]


class SchedulePages:
    def __init__(self, ui: Ui) -> None:
        self.ui = ui

    def index(self, request: Request) -> Response:
        loaded = self.ui.schedules.load()
        entries = list(loaded.entries)
        start = _page_start(request.query_params.get("page"))
        shown = entries[start : start + schedule_data.PAGE]
        with self.ui.store.connection() as conn:
            now, _ = jobs_data.clock(conn)
            views = schedule_data.views(conn, shown, now)
        return self.ui.render(
            request,
            "schedules.html",
            nav="schedules",
            now=now,
            views=views,
            notice=loaded.notice,
            total=len(entries),
            start=start,
            page_size=schedule_data.PAGE,
        )

    def detail(self, request: Request) -> Response:
        name = request.path_params["name"]
        entry = self.ui.schedules.load().find(name)
        if entry is None:
            raise HTTPException(404, f"no schedule named {name!r}")
        schedule = entry.schedule
        params = request.query_params
        state = params.get("state") or None
        if state is not None and state not in PERIOD_STATES:
            raise HTTPException(400, f"state: one of {', '.join(PERIOD_STATES)}")
        count = _bounded_int(params.get("n"), 20, timeline.MAX_PREVIEW)
        with self.ui.store.connection() as conn:
            now, _ = jobs_data.clock(conn)
            start, start_error = _start(params.get("from"), schedule.zone, now)
            before = _instant(params.get("before"))
            fires = (
                timeline.last_periods(schedule, now, HISTORY_PAGE)
                if before is None
                else timeline.periods_before(schedule, before, HISTORY_PAGE)
            )
            jobs = schedule_data.periods_jobs(conn, [(schedule, fires)])
            view = schedule_data.views(conn, [entry], now)[0]
        periods = schedule_data.make_periods(entry, fires, jobs, now)
        if before is not None and periods and periods[0].state == "overdue":
            periods[0].state = "missed"  # only the newest period of all can be overdue
        shown = [p for p in periods if state is None or p.state == state]
        return self.ui.render(
            request,
            "schedule.html",
            nav="schedules",
            now=now,
            view=view,
            preview=timeline.preview(schedule, start, count),
            start=start,
            count=count,
            start_error=start_error,
            from_value=params.get("from") or "",
            periods=shown,
            state=state,
            states=PERIOD_STATES,
            older=fires[-1] if len(fires) == HISTORY_PAGE else None,
        )


def _start(text: str | None, zone: Any, now: datetime) -> tuple[datetime, str | None]:
    """The preview's start: ``now``, or a date/time read in the schedule's zone."""
    if not text:
        return now, None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return now, f"'from' must look like 2027-03-13 or 2027-03-13T01:30 (got {text[:40]!r})"
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    return value - timedelta(microseconds=1), None


def _instant(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise HTTPException(400, "before: an ISO-8601 time") from None
    if value.tzinfo is None:
        raise HTTPException(400, "before: needs a time zone (…Z)")
    return value


def _bounded_int(text: str | None, default: int, high: int) -> int:
    if not text:
        return default
    if not text.isdigit():
        raise HTTPException(400, "n: a number of fire times")
    return max(1, min(int(text), high))


def _page_start(text: str | None) -> int:
    if not text or not text.isdigit() or len(text) > 6:
        return 0
    return int(text)
