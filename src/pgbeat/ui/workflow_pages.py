"""The Workflow page: a workflow's steps as a graph and a table (status colours, each
step's parents, a link to each step's job), through the same call as `pgbeat workflows
show` (pgbeat.jobs.workflows.workflow); ui/workflow_graph.py lays them out."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from pgbeat.jobs import workflows
from pgbeat.ui import jobs_data, workflow_graph
from pgbeat.ui.context import Ui

TABLE_ROWS = 500  # steps the table lists; the job list (?workflow=ID) pages through all


def routes(ui: Ui) -> list[BaseRoute]:
    pages = WorkflowPages(ui)
    return [Route("/workflows/{workflow_id:int}", pages.detail, methods=["GET"], name="workflow")]


class WorkflowPages:
    def __init__(self, ui: Ui) -> None:
        self.ui = ui

    def detail(self, request: Request) -> Response:
        workflow_id = int(request.path_params["workflow_id"])
        if workflow_id < 1:
            raise HTTPException(404, f"no workflow {workflow_id}")
        with self.ui.store.connection() as conn:
            now, _ = jobs_data.clock(conn)
            found = workflows.workflow(conn, workflow_id)
        if found is None:
            raise HTTPException(404, f"no workflow {workflow_id} (it may have been purged)")
        rows = workflow_graph.step_rows(found.steps, now)
        return self.ui.render(
            request,
            "workflow.html",
            nav="jobs",
            now=now,
            flow=found,
            graph=workflow_graph.graph(found.id, found.steps),
            rows=rows[:TABLE_ROWS],
            hidden_rows=max(0, len(rows) - TABLE_ROWS),
        )
