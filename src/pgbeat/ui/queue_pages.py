"""The Queues page: pending and running jobs per queue, its limits, its busiest limit keys,
and pause/resume, through the same calls as `pgbeat queues` (pgbeat.jobs.queues)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from pgbeat import flow
from pgbeat.jobs import queues
from pgbeat.ui import jobs_data
from pgbeat.ui.context import Ui, redirect

KEYS_SHOWN = 10  # busiest limit keys per queue
PAGE = 100  # queues per page


def routes(ui: Ui) -> list[BaseRoute]:
    pages = QueuePages(ui)
    return [
        Route("/queues", pages.index, methods=["GET"], name="queues"),
        # the name in the form: a queue named "a/b", "." or ".." cannot be a path segment
        Route("/queues/{action}", pages.act, methods=["POST"], name="queue_action"),
        Route("/queues/{name}/{action}", pages.act, methods=["POST"], name="queue_action_named"),
    ]


class QueuePages:
    def __init__(self, ui: Ui) -> None:
        self.ui = ui

    def index(self, request: Request) -> Response:
        """One page of queues (by name, after ``after``), filtered by ``name`` (contains):
        a keyset page whose cost follows the page, not the number of queues."""
        name = request.query_params.get("name", "").strip()[: flow.MAX_QUEUE_LENGTH] or None
        after = request.query_params.get("after", "")[: flow.MAX_QUEUE_LENGTH] or None
        with self.ui.store.connection() as conn:
            now, _ = jobs_data.clock(conn)
            page = queues.list_queues(conn, name=name, after=after, limit=PAGE)
            found = page.queues
            keys = {
                state.settings.name: queues.running_keys(conn, state.settings.name, KEYS_SHOWN)
                for state in found
                if state.running and state.settings.key_concurrency is not None
            }
        return self.ui.render(
            request,
            "queues.html",
            nav="queues",
            now=now,
            queues=[_view(state, keys.get(state.settings.name, [])) for state in found],
            name=name or "",
            next_after=None if page.next_after is None else quote(page.next_after, safe=""),
            searched_to=page.searched_to,
            quoted_name=quote(name or "", safe=""),
        )

    async def act(self, request: Request) -> Response:
        form = await self.ui.read_form(request)
        action = request.path_params["action"]
        name = request.path_params.get("name") or (form.get("queue") or [""])[0]
        if action not in ("pause", "resume"):
            raise HTTPException(404, f"no action {action!r}")
        if flow.queue_problem(name) is not None:
            raise HTTPException(400, f"queue {name[:40]!r}: {flow.queue_problem(name)}")
        message = await run_in_threadpool(self._act, request, name, action)
        return redirect(request, "/queues", message)

    def _act(self, request: Request, name: str, action: str) -> str:
        with self.ui.store.connection() as conn:
            if action == "pause":
                queues.pause_queue(conn, name)
            else:
                queues.resume_queue(conn, name)
        result = f"Queue {name} {'paused' if action == 'pause' else 'resumed'}."
        self.ui.log_action(request, f"queue {action}", queue=name, result=result)
        return result


def _view(state: queues.QueueState, keys: list[tuple[str, int]]) -> dict[str, Any]:
    limit = state.settings.key_concurrency
    return {
        **state.as_json(),
        "problem": state.settings.problem,
        "quoted": quote(state.settings.name, safe=""),
        "saturated": [(key, count) for key, count in keys if limit and count >= limit],
        "busiest": keys,
    }
