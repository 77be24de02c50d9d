"""The schedules list and a schedule's page: next fires with DST notes, period history,
pause, resume, run now and backfill with a preview.

Fire times are computed by the scheduler's own functions at the database's ``now``. The
history is the one the scheduler replicas write (``pgbeat_schedule_history``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from pgbeat import job_inputs
from pgbeat.errors import ScheduleNotFound
from pgbeat.scheduling import state as state_api
from pgbeat.scheduling.timing import typed_time
from pgbeat.ui import jobs_data, schedule_data, timeline
from pgbeat.ui.context import Ui, redirect

HISTORY_PAGE = 50
# the history's outcomes, in the database
OUTCOMES = ("enqueued", "skipped", "missed", "manual", "backfill", "buffered")
ACTIONS = {"pause": "Paused", "resume": "Resumed", "run": "Run now", "backfill": "Backfilled"}
# A preview starts between these: its fires must stay inside Python's calendar.
PREVIEW_FROM = (datetime(1, 1, 3, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC))


def routes(ui: Ui) -> list[BaseRoute]:
    pages = SchedulePages(ui)
    return [
        Route("/schedules", pages.index, methods=["GET"], name="schedules"),
        Route("/schedules/{name}", pages.detail, methods=["GET"], name="schedule"),
        Route("/schedules/{name}/{action}", pages.act, methods=["POST"], name="schedule_action"),
    ]


class SchedulePages:
    def __init__(self, ui: Ui) -> None:
        self.ui = ui

    def index(self, request: Request) -> Response:
        start = _page_start(request.query_params.get("page"))
        with self.ui.store.connection() as conn:
            loaded = self.ui.schedules.load(conn)
            entries = list(loaded.entries)
            now, _ = jobs_data.clock(conn)
            views = schedule_data.views(conn, entries[start : start + schedule_data.PAGE], now)
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
        params = request.query_params
        state = params.get("state") or None
        count = _bounded_int(params.get("n"), 20, timeline.MAX_PREVIEW)
        _instant(params.get("before"), UTC)  # refused before any SQL when it cannot be read
        with self.ui.store.connection() as conn:
            loaded = self.ui.schedules.load(conn)
            entry = loaded.find(name)
            if entry is None:
                raise HTTPException(404, f"no schedule named {name!r}")
            if state is not None and state not in OUTCOMES:
                raise HTTPException(400, f"state: one of {', '.join(OUTCOMES)}")
            now, _ = jobs_data.clock(conn)
            zone = entry.schedule.zone
            before = _instant(params.get("before"), zone)
            view = schedule_data.views(conn, [entry], now)[0]
            periods, older = self._history(conn, view, before, state)
            backfill, backfill_error = _backfill_preview(
                conn, name, zone, params.get("bf_from"), params.get("bf_to")
            )
        start, start_error = _start(params.get("from"), entry.schedule.zone, now)
        return self.ui.render(
            request,
            "schedule.html",
            nav="schedules",
            now=now,
            view=view,
            preview=timeline.preview(entry.schedule, start, count),
            start=start,
            count=count,
            start_error=start_error,
            from_value=params.get("from") or "",
            periods=periods,
            state=state,
            states=OUTCOMES,
            older=older,
            backfill=backfill,
            backfill_error=backfill_error,
            backfill_from=params.get("bf_from") or "",
            backfill_to=params.get("bf_to") or "",
        )

    def _history(
        self,
        conn: Any,
        view: schedule_data.ScheduleView,
        before: datetime | None,
        state: str | None,
    ) -> tuple[list[schedule_data.Period], datetime | None]:
        """One page of the schedule's periods, newest first, and the cursor of the next."""
        name = view.schedule.name
        found = schedule_data.history_rows(
            conn, [name], HISTORY_PAGE, outcome=state, before=before
        ).get(name, [])
        newest = before is None and state is None
        periods = schedule_data.periods_from_history(
            found, overdue=schedule_data.overdue_period(view.status) if newest else None
        )
        older = found[-1]["fire_at"] if len(found) == HISTORY_PAGE else None
        return periods, older

    async def act(self, request: Request) -> Response:
        form = await self.ui.read_form(request)
        name, action = request.path_params["name"], request.path_params["action"]
        if action not in ACTIONS:
            raise HTTPException(404, f"no action {action!r}")
        message = await run_in_threadpool(self._act, request, name, action, form)
        return redirect(request, f"/schedules/{quote(name)}", message)

    def _act(self, request: Request, name: str, action: str, form: dict[str, list[str]]) -> str:
        by = f"ui:{self.ui.identity(request).who}"
        with self.ui.store.connection() as conn:
            try:
                if action == "run":
                    job_id = state_api.run_schedule_now(conn, name, by=by)
                    result = f"Manual run of {name} enqueued as job {job_id}."
                elif action == "backfill":
                    found = state_api.get_schedule(conn, name)
                    zone = found.schedule.zone if found and found.schedule else None
                    start, end = (_form_instant(form, key, zone) for key in ("from", "to"))
                    try:
                        count = state_api.backfill(conn, name, start, end, by=by)
                    except ValueError as exc:
                        raise HTTPException(400, str(exc)) from None
                    result = f"Backfill of {name}: {count} periods enqueued."
                elif action == "pause":
                    changed = state_api.pause_schedule(conn, name, by=by)
                    result = f"{name} paused." if changed else f"{name} was paused already."
                else:
                    changed = state_api.resume_schedule(conn, name, by=by)
                    result = f"{name} resumed." if changed else f"{name} was running already."
            except ScheduleNotFound as exc:
                raise HTTPException(404, str(exc)) from None
        self.ui.log_action(request, f"schedule {action}", schedule=name, result=result)
        return result


def _start(text: str | None, zone: ZoneInfo, now: datetime) -> tuple[datetime, str | None]:
    """The preview's start: ``now``, or a date/time (without an offset: in the schedule's
    zone, as every time typed about a schedule is read: timing.typed_time)."""
    if not text:
        return now, None
    try:
        value = typed_time(text, zone)
    except ValueError as exc:
        return now, f"'from': {exc}"
    if not PREVIEW_FROM[0] <= value <= PREVIEW_FROM[1]:  # fires past 9999 cannot be shown
        return (
            now,
            f"'from' must be between the years {PREVIEW_FROM[0].year} and {PREVIEW_FROM[1].year}",
        )
    return value - timedelta(microseconds=1), None


def _backfill_preview(
    conn: Any, name: str, zone: ZoneInfo, start: str | None, end: str | None
) -> tuple[state_api.BackfillPlan | None, str | None]:
    """What a backfill of the asked range would enqueue, or why it cannot run."""
    if not (start or end):
        return None, None
    try:
        bounds = (typed_time(text or "", zone) for text in (start, end))
        return state_api.preview_backfill(conn, name, *bounds), None
    except (ValueError, TypeError) as exc:
        return None, str(exc)


def _form_instant(form: dict[str, list[str]], key: str, zone: ZoneInfo | None) -> datetime:
    """A backfill bound from the form, read as the preview read it."""
    try:
        return typed_time((form.get(key) or [""])[0], zone)
    except ValueError as exc:
        raise HTTPException(400, f"{key}: {exc}") from None


def _instant(text: str | None, zone: tzinfo) -> datetime | None:
    """The history page's cursor (``before``), read as any time typed about the schedule."""
    if not text:
        return None
    try:
        value = typed_time(text, zone)
    except ValueError as exc:
        raise HTTPException(400, f"before: {exc}") from None
    if not job_inputs.EARLIEST_RUN_AT <= value <= job_inputs.LATEST_RUN_AT:
        raise HTTPException(400, "before: a time between the years 1 and 9999")
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
