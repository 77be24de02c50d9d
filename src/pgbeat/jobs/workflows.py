"""Workflows on the caller's connection: insert one (in the caller's transaction, once per
key), read one's steps, cancel one, and the repair pass the workers run.

Each call is a plan for db/runner.py. The advance (a parent's end releasing or cancelling
its children) is not here: it is the trigger of migrations/0017_workflows.sql.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from pgbeat.db import runner
from pgbeat.db.literals import bool_array, number_array
from pgbeat.db.runner import DICTS, Plan
from pgbeat.db.sql import workflows as workflow_sql
from pgbeat.jobs.workflow_definition import Workflow, insert_params

FINAL = ("done", "failed", "cancelled")
REPAIR_BATCH = 1000
CANCEL_REASON = "workflow cancelled"


@dataclass(frozen=True)
class EnqueuedWorkflow:
    """What ``enqueue_workflow`` returns: the workflow's id and its steps' job ids by name.

    ``inserted`` is False when a workflow with the same key existed: this is that one.
    """

    id: int
    jobs: dict[str, int]
    inserted: bool = True


@dataclass(frozen=True)
class WorkflowStep:
    """One step as ``pgbeat.workflow`` reads it. ``waiting``: pending, held for parents (it
    is in no queue until they end: ``run_at`` is None)."""

    name: str
    job_id: int
    kind: str
    status: str
    after: list[str]
    waiting: bool
    queue: str
    attempts: int
    last_error: str | None
    finished_at: datetime | None
    run_at: datetime | None = None  # when it is or was due; None while held for parents
    started_at: datetime | None = None  # its last start, if it started


class Steps(list[WorkflowStep]):
    """A workflow's steps in the order they were added; also found by name
    (``steps["report"]``, ``steps.get(name)``, ``keys()``, ``values()``, ``items()``)."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            for step in self:
                if step.name == key:
                    return step
            raise KeyError(key)
        return super().__getitem__(key)

    def get(self, name: str, default: WorkflowStep | None = None) -> WorkflowStep | None:
        try:
            found: WorkflowStep = self[name]
        except KeyError:
            return default
        return found

    def keys(self) -> list[str]:
        return [step.name for step in self]

    def values(self) -> list[WorkflowStep]:
        return list(self)

    def items(self) -> list[tuple[str, WorkflowStep]]:
        return [(step.name, step) for step in self]


@dataclass(frozen=True)
class WorkflowState:
    """A workflow and its steps (in the order they were added), as ``pgbeat.workflow`` reads it."""

    id: int
    name: str | None
    key: str | None
    created_at: datetime
    steps: Steps = field(default_factory=Steps)

    @property
    def counts(self) -> dict[str, int]:
        """Steps by status (``waiting`` apart from the other pending ones)."""
        return dict(Counter("waiting" if s.waiting else s.status for s in self.steps))

    @property
    def status(self) -> str:
        """``running`` while a step has not ended; then ``done`` when every step ended done,
        else ``failed`` when one failed, else ``cancelled``."""
        statuses = {step.status for step in self.steps}
        if statuses - set(FINAL):
            return "running"
        if statuses <= {"done"}:
            return "done"
        return "failed" if "failed" in statuses else "cancelled"

    @property
    def jobs(self) -> dict[str, int]:
        return {step.name: step.job_id for step in self.steps}


@dataclass(frozen=True)
class CancelledWorkflow:
    """What ``cancel_workflow`` did: ``cancelled`` pending steps ended, ``stopping`` running
    ones asked to stop (they end cancelled within about a second)."""

    id: int
    cancelled: int
    stopping: int


def _enqueue_plan(flow: Workflow, key: str | None) -> Plan[EnqueuedWorkflow]:
    """The checks, at once (no SQL, not even a BEGIN, on bad input), then the plan."""
    if key is not None and (not isinstance(key, str) or not key):
        raise ValueError("a workflow's key must be a non-empty string or None")
    return _insert_plan(flow, key, *insert_params(flow))


def _insert_plan(
    flow: Workflow,
    key: str | None,
    jobs: dict[str, Any],
    steps: dict[str, Any],
    edges: dict[str, Any],
) -> Plan[EnqueuedWorkflow]:
    """The workflow row, its jobs, steps and edges."""
    found = yield workflow_sql.WORKFLOWS_INSERT, {"name": flow.name, "key": key}
    if not found:
        rows = yield workflow_sql.WORKFLOWS_FIND_KEY, {"key": key}
        return EnqueuedWorkflow(int(rows[0][0]), dict(rows[0][1]), inserted=False)
    workflow_id = int(found[0][0])
    ids = sorted(
        int(row[0])
        for row in (yield workflow_sql.WORKFLOW_JOBS_INSERT, {**jobs, "workflow_id": workflow_id})
    )
    id_text = [str(job_id) for job_id in ids]
    yield (
        workflow_sql.WORKFLOW_STEPS_INSERT,
        {
            **steps,
            "workflow_id": workflow_id,
            "job_ids": number_array(id_text),
        },
    )
    if edges["parents"]:
        yield (
            workflow_sql.WORKFLOW_EDGES_INSERT,
            {
                "parents": number_array(id_text[i] for i in edges["parents"]),
                "children": number_array(id_text[i] for i in edges["children"]),
                "sole": bool_array(edges["sole"]),
            },
        )
    return EnqueuedWorkflow(workflow_id, {s.name: ids[i] for i, s in enumerate(flow.steps)})


@runner.async_aware("enqueue_workflow_async")
def enqueue_workflow(
    conn: psycopg.Connection[Any], flow: Workflow, *, key: str | None = None
) -> EnqueuedWorkflow:
    """Insert every step of ``flow`` as a job on ``conn``, in its current transaction.

    Returns the workflow's ``id`` and ``jobs`` (step name -> job id). With ``key``, a
    workflow of that key inserts once: a later call (or one waiting on a concurrent one
    that commits) inserts nothing and returns the first (``inserted=False``). A schedule's
    handler fans out once per period with ``key=job.unique_key``. ``conn`` is anything
    ``enqueue`` takes; an async one returns the coroutine of ``enqueue_workflow_async``.
    """
    return runner.run(conn, _enqueue_plan(flow, key), together=True)


async def enqueue_workflow_async(
    conn: object, flow: Workflow, *, key: str | None = None
) -> EnqueuedWorkflow:
    """``enqueue_workflow`` on an async connection (psycopg or SQLAlchemy), awaited."""
    return await runner.run_on_async(conn, _enqueue_plan(flow, key), together=True)


def _check_id(workflow_id: object) -> int:
    if isinstance(workflow_id, bool) or not isinstance(workflow_id, int):
        raise TypeError(f"a workflow id must be an int, not {type(workflow_id).__name__}")
    if workflow_id <= 0:
        raise ValueError("a workflow id must be positive")
    return workflow_id


def _show_plan(workflow_id: int) -> Plan[WorkflowState | None]:
    found = yield workflow_sql.WORKFLOWS_GET, {"id": workflow_id}, DICTS
    if not found:
        return None
    rows = yield workflow_sql.WORKFLOW_STEPS_LIST, {"id": workflow_id}, DICTS
    steps = Steps(WorkflowStep(**{**row, "after": list(row["after"])}) for row in rows)
    return WorkflowState(**found[0], steps=steps)


@runner.async_aware("workflow_async")
def workflow(conn: psycopg.Connection[Any], workflow_id: int) -> WorkflowState | None:
    """The workflow ``workflow_id`` with its steps' job ids and statuses, or None when there
    is none. An async connection returns the coroutine of ``workflow_async``."""
    return runner.run(conn, _show_plan(_check_id(workflow_id)))


async def workflow_async(conn: object, workflow_id: int) -> WorkflowState | None:
    """``workflow`` on an async connection (psycopg or SQLAlchemy), awaited."""
    return await runner.run_on_async(conn, _show_plan(_check_id(workflow_id)))


def _cancel_plan(workflow_id: int, reason: str) -> Plan[CancelledWorkflow | None]:
    rows = yield workflow_sql.WORKFLOW_JOBS_CANCEL, {"id": workflow_id, "reason": reason}
    if not rows and not (yield workflow_sql.WORKFLOWS_GET, {"id": workflow_id}):
        return None
    stopping = sum(1 for row in rows if row[1] == "running")
    return CancelledWorkflow(workflow_id, len(rows) - stopping, stopping)


@runner.async_aware("cancel_workflow_async")
def cancel_workflow(
    conn: psycopg.Connection[Any], workflow_id: int, *, reason: str = CANCEL_REASON
) -> CancelledWorkflow | None:
    """Cancel every step of the workflow that has not ended, in the caller's transaction:
    pending ones at once, running ones as ``cancel_job`` does (their handlers are told).
    None when there is no such workflow. An async connection returns the coroutine of
    ``cancel_workflow_async``."""
    return runner.run(conn, _cancel_plan(_check_id(workflow_id), reason))


async def cancel_workflow_async(
    conn: object, workflow_id: int, *, reason: str = CANCEL_REASON
) -> CancelledWorkflow | None:
    """``cancel_workflow`` on an async connection (psycopg or SQLAlchemy), awaited."""
    return await runner.run_on_async(conn, _cancel_plan(_check_id(workflow_id), reason))


def repair_plan(batch: int) -> Plan[tuple[int, int]]:
    rows = yield workflow_sql.WORKFLOW_STEPS_REPAIR, {"batch": batch}
    yield workflow_sql.WORKFLOWS_DELETE_EMPTY, {"batch": batch}
    released = sum(1 for row in rows if row[1] == "pending")
    return released, len(rows) - released


def repair_workflows(
    conn: psycopg.Connection[Any], *, batch: int = REPAIR_BATCH
) -> tuple[int, int]:
    """Release or cancel held steps whose parents all ended (what the advance left behind,
    if anything did), and forget workflows with no step left; (released, cancelled)."""
    return runner.run(conn, repair_plan(batch))
