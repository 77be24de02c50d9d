"""The jobs list, a job's page, and the actions on jobs (one, checked, or all matching).

An action on all jobs matching a filter always goes through a confirm page that shows the
exact count; the POST then repeats the filter and the newest id seen, and the statement
re-checks each job's status, so the result reads "retried 37, skipped 3 whose status changed".
"""

from __future__ import annotations

from typing import Any

import psycopg
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from pgbeat.db.guarded import Unreadable
from pgbeat.errors import JobNotFound
from pgbeat.jobs import control, reads
from pgbeat.ui import jobs_data
from pgbeat.ui.context import Ui, first, redirect
from pgbeat.ui.filters import (
    ACTION_DONE,
    ACTION_WORDS,
    ACTIONS_FOR_STATUS,
    FilterError,
    JobFilter,
)
from pgbeat.ui.redact import payload_text

MAX_CHECKED = 1000


def routes(ui: Ui) -> list[BaseRoute]:
    pages = JobPages(ui)
    return [
        Route("/jobs", pages.index, methods=["GET"], name="jobs"),
        Route("/jobs/confirm", pages.confirm, methods=["GET"], name="jobs_confirm"),
        Route("/jobs/bulk", pages.bulk, methods=["POST"], name="jobs_bulk"),
        Route("/jobs/{job_id:int}", pages.detail, methods=["GET"], name="job"),
        Route("/jobs/{job_id:int}/{action}", pages.act_one, methods=["POST"], name="job_action"),
    ]


class JobPages:
    def __init__(self, ui: Ui) -> None:
        self.ui = ui

    def index(self, request: Request) -> Response:
        try:
            job_filter = JobFilter.from_query(
                request.query_params, hide_payloads=self.ui.settings.hide_payloads
            )
            before = _cursor(request.query_params.get("before"))
        except FilterError as exc:
            return self._list_page(request, JobFilter(), None, error=str(exc))
        return self._list_page(request, job_filter, before, error=None)

    def _list_page(
        self, request: Request, job_filter: JobFilter, before: int | None, error: str | None
    ) -> Response:
        with self.ui.store.connection() as conn:
            schedule_kind = self._schedule_kind(conn, job_filter)
            now, max_id = jobs_data.clock(conn)
            page = jobs_data.jobs_page(conn, job_filter, before, max_id, schedule_kind)
        for row in page.rows:
            row["payload_text"] = _shown(row["payload"], self.ui.settings.hide_payloads, False)
        return self.ui.render(
            request,
            "jobs.html",
            nav="jobs",
            now=now,
            f=job_filter,
            page=page,
            error=error,
            before=before,
            actions=job_filter.actions() if self.ui.can_act(request) else (),
            action_words=ACTION_WORDS,
            cap=jobs_data.COUNT_CAP,
        )

    def detail(self, request: Request) -> Response:
        job_id = int(request.path_params["job_id"])
        with self.ui.store.connection() as conn:
            now, _ = jobs_data.clock(conn)
            try:
                shown = reads.show_job(conn, job_id)
            except JobNotFound:
                raise HTTPException(404, f"no job {job_id} (it may have been purged)") from None
            schedules = self.ui.schedules.load(conn) if shown.schedule else None
        job = shown.job
        entry = schedules.find(shown.schedule) if schedules and shown.schedule else None
        extra = {k: v for k, v in job.items() if k not in _SHOWN_FIELDS}
        return self.ui.render(
            request,
            "job.html",
            nav="jobs",
            now=now,
            job=job,
            attempts=shown.attempts,
            run_seconds=shown.run_seconds,
            waiting=shown.waiting_for_parents,
            schedule=entry.schedule if entry else None,
            extra_fields=extra,
            payload=_shown(job["payload"], self.ui.settings.hide_payloads, True),
            actions=_job_actions(job["status"]) if self.ui.can_act(request) else (),
            action_words=ACTION_WORDS,
            result=None
            if job.get("result") is None
            else _shown(job["result"], self.ui.settings.hide_payloads, True),
        )

    async def act_one(self, request: Request) -> Response:
        form = await self.ui.read_form(request)
        del form
        job_id = int(request.path_params["job_id"])
        action = str(request.path_params["action"]).replace("-", "_")
        if action not in ACTION_WORDS:
            raise HTTPException(404, f"no action {action!r}")
        if action == "cancel":  # pending or running: the one cancel every face uses
            message = await run_in_threadpool(self._cancel_one, request, job_id)
            return redirect(request, f"/jobs/{job_id}", message)
        done = await run_in_threadpool(self._act_on_ids, request, action, [job_id])
        if action == "delete" and done:
            return redirect(request, "/jobs", f"Job {job_id} deleted.")
        message = (
            f"Job {job_id} {ACTION_DONE[action]}."
            if done
            else f"Job {job_id} was not {ACTION_DONE[action]}: its status no longer allows it."
        )
        return redirect(request, f"/jobs/{job_id}", message)

    def confirm(self, request: Request) -> Response:
        action = request.query_params.get("action", "")
        if action not in ACTION_WORDS or not self.ui.can_act(request):
            raise HTTPException(400 if self.ui.can_act(request) else 403, "no such action")
        try:
            job_filter = JobFilter.from_query(
                request.query_params, hide_payloads=self.ui.settings.hide_payloads
            )
        except FilterError as exc:
            raise HTTPException(400, str(exc)) from None
        if action not in job_filter.actions():
            raise HTTPException(400, f"{ACTION_WORDS[action]} needs a status filter that allows it")
        below = _int(request.query_params.get("below", ""))
        with self.ui.store.connection() as conn:
            now, newest = jobs_data.clock(conn)
            max_id = newest if below is None else min(newest, below - 1)
            floor = jobs_data.window_floor(job_filter, max_id + 1)
            count = jobs_data.count_matching(
                conn, job_filter, max_id, floor, self._schedule_kind(conn, job_filter)
            )
        return self.ui.render(
            request,
            "confirm.html",
            nav="jobs",
            now=now,
            f=job_filter,
            action=action,
            action_words=ACTION_WORDS,
            count=count,
            max_id=max_id,
            floor=floor,
            cap=jobs_data.COUNT_CAP,
        )

    async def bulk(self, request: Request) -> Response:
        form = await self.ui.read_form(request)
        action = first(form, "action")
        if action not in ACTION_WORDS:
            raise HTTPException(400, "no such action")
        flat = {name: values[0] for name, values in form.items() if values}
        try:
            job_filter = JobFilter.from_query(flat, hide_payloads=self.ui.settings.hide_payloads)
        except FilterError as exc:
            raise HTTPException(400, str(exc)) from None
        back = "/jobs?" + job_filter.query()
        if first(form, "scope") == "all":
            return await run_in_threadpool(
                self._act_on_all, request, action, job_filter, form, back
            )
        ids = _ids(form.get("ids", []))
        if not ids:
            return redirect(request, back, "Check some jobs first, or use the all-matching action.")
        acted = await run_in_threadpool(self._act_on_ids, request, action, ids)
        return redirect(request, back, _result(action, len(acted), len(ids) - len(acted)))

    def _act_on_all(
        self,
        request: Request,
        action: str,
        job_filter: JobFilter,
        form: dict[str, list[str]],
        back: str,
    ) -> Response:
        if action not in job_filter.actions():
            raise HTTPException(400, f"{ACTION_WORDS[action]} needs a status filter that allows it")
        max_id, expected = _int(first(form, "max_id")), _int(first(form, "expected"))
        floor = _int(first(form, "floor"))
        if max_id is None or expected is None or expected > jobs_data.COUNT_CAP:
            raise HTTPException(400, "confirm the action on its confirm page first")
        if floor is None and job_filter.searches_window():
            raise HTTPException(400, "confirm the action on its confirm page first")
        with self.ui.store.connection() as conn:
            acted = jobs_data.act_on_matching(
                conn,
                action,
                job_filter,
                (floor, max_id),
                self._schedule_kind(conn, job_filter),
                self._reason(request),
            )
        skipped = max(0, expected - len(acted))
        self.ui.log_action(
            request,
            action,
            filter=job_filter.describe() or "all",
            ids=f"{floor or 1}-{max_id}",
            affected=len(acted),
            skipped=skipped,
        )
        return redirect(request, back, _result(action, len(acted), skipped))

    def _act_on_ids(self, request: Request, action: str, ids: list[int]) -> list[int]:
        with self.ui.store.connection() as conn:
            acted = jobs_data.act_on_ids(conn, action, ids, self._reason(request))
        self.ui.log_action(
            request, action, ids=ids[:50], affected=len(acted), skipped=len(ids) - len(acted)
        )
        return acted

    def _cancel_one(self, request: Request, job_id: int) -> str:
        with self.ui.store.connection() as conn:
            try:
                who = self.ui.identity(request).who
                found = control.cancel_job(conn, job_id, reason=f"via the dashboard by {who}")
            except JobNotFound:
                raise HTTPException(404, f"no job {job_id}") from None
        self.ui.log_action(request, "cancel", ids=[job_id], affected=int(found.accepted))
        if found.previous_status == "running":
            return f"Job {job_id} is running: its handler is told to stop; it ends cancelled."
        if found.accepted:
            return f"Job {job_id} cancelled."
        return f"Job {job_id} was not cancelled: it is {found.previous_status}."

    def _reason(self, request: Request) -> str:
        return f"cancelled: via the dashboard by {self.ui.identity(request).who}"

    def _schedule_kind(self, conn: psycopg.Connection[Any], job_filter: JobFilter) -> str | None:
        if job_filter.schedule is None:
            return None
        entry = self.ui.schedules.load(conn).find(job_filter.schedule)
        return entry.schedule.kind if entry else None


_SHOWN_FIELDS = {
    "id",
    "kind",
    "status",
    "attempts",
    "max_attempts",
    "snoozes",
    "run_at",
    "created_at",
    "finished_at",
    "unique_key",
    "last_error",
    "payload",
    "locked_until",
    "keep_until",
    "result",
    "started_at",
    "tags",
    "workflow_id",
}


def _job_actions(status: str) -> tuple[str, ...]:
    """The actions a job's own page offers: those of the list filtered on its status."""
    return ACTIONS_FOR_STATUS.get(status, ())


def _result(action: str, acted: int, skipped: int) -> str:
    text = f"{ACTION_DONE[action].capitalize()} {acted:,}"
    if skipped:
        text += f", skipped {skipped:,} whose status changed"
    return text + "."


def _ids(values: list[str]) -> list[int]:
    ids = [int(v) for v in values if v.isdigit() and len(v) <= 18]
    if len(ids) > MAX_CHECKED:
        raise HTTPException(400, f"at most {MAX_CHECKED} checked jobs at once")
    return ids


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and len(text) <= 18 else None


def _cursor(value: str | None) -> int | None:
    if not value:
        return None
    if not value.isdigit() or len(value) > 18:
        raise FilterError("before: a job id")
    return int(value)


def _shown(value: Any, hidden: bool, pretty: bool) -> str:
    """A payload or result as the page shows it; one the database could not hand over (JSON
    nested too deeply for Python) is named, never a 500 for every viewer."""
    if isinstance(value, Unreadable):
        return f"(cannot be shown: {value.reason})"
    return payload_text(value, hidden=hidden, pretty=pretty)
