"""A backend for Django's task framework: ``@task`` functions become pgbeat jobs.

    TASKS = {"default": {"BACKEND": "pgbeat.contrib.django.tasks.PgbeatBackend"}}

``task.enqueue(...)`` inserts a job on Django's connection, so it commits or rolls back
with the ``transaction.atomic()`` block it is in; ``manage.py pgbeat_worker`` runs it
(worker.py: a handler for every task); ``get_result(id)`` reads its row. The job's kind is
the task's module path, its payload ``{"args": [...], "kwargs": {...}}``, its result the
task's return value. Works with Django 6's ``django.tasks`` and the ``django_tasks``
backport (framework.py). OPTIONS: ``DATABASE`` (Django's alias, "default"),
``MAX_ATTEMPTS`` (runs before a task is FAILED, pgbeat's 8), ``TAGS`` (a list, on every job).
"""

from __future__ import annotations

import builtins
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils import timezone
from django.utils.module_loading import import_string

import pgbeat
from pgbeat import flow, job_inputs
from pgbeat.contrib.django.framework import (
    BaseTaskBackend,
    InvalidTaskError,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from pgbeat.db.frameworks import sync_connection
from pgbeat.db.sql import attempts as attempt_sql
from pgbeat.db.sql.jobs import tasks as task_sql

# A job's status as the framework names it. pgbeat retries a failed run (READY again,
# with the error in ``errors``) until its attempts are spent; a cancelled job is FAILED:
# the framework has no word for it, and it will not run.
STATUS = {
    "pending": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
    "cancelled": TaskResultStatus.FAILED,
}


class PgbeatBackend(BaseTaskBackend):  # type: ignore[misc]
    """Tasks as pgbeat jobs, in the caller's transaction; results read back from the row."""

    supports_defer = True  # run_after: the job's run_at
    supports_async_task = True  # pgbeat's workers await async handlers on their event loop
    supports_get_result = True  # from any process: the jobs table
    supports_priority = True  # the job's priority: higher runs first, as in Django

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        if "QUEUES" not in params:
            self.queues: set[str] = set()  # any queue name pgbeat accepts
        options = params.get("OPTIONS", {})
        self.database: str = options.get("DATABASE", "default")
        self.max_attempts: int | None = options.get("MAX_ATTEMPTS")
        if self.max_attempts is not None and (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise ImproperlyConfigured(
                f"TASKS[{alias!r}] OPTIONS MAX_ATTEMPTS: a whole number from 1, "
                f"got {self.max_attempts!r}"
            )
        self.tags: list[str] | None = job_inputs.check_tags(options.get("TAGS"), "OPTIONS TAGS")

    def validate_task(self, task: Task[Any, Any]) -> None:
        """Django's checks, then pgbeat's on the queue name (before any SQL)."""
        super().validate_task(task)
        problem = flow.queue_problem(task.queue_name)
        if problem is not None:
            raise InvalidTaskError(f"queue_name {task.queue_name!r}: {problem}")

    def enqueue(
        self, task: Task[Any, Any], args: Sequence[Any], kwargs: dict[str, Any]
    ) -> TaskResult[Any]:
        """Insert the task's job on Django's connection, in its current transaction."""
        self.validate_task(task)
        payload = {"args": _json(list(args)), "kwargs": _json(dict(kwargs))}
        job_id = pgbeat.enqueue(
            connections[self.database],
            task.module_path,
            payload,
            run_at=task.run_after,
            queue=task.queue_name,
            priority=task.priority,
            max_attempts=self.max_attempts,
            tags=self.tags,
        )
        result = TaskResult(
            task=task,
            id=str(job_id),
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=payload["args"],
            kwargs=payload["kwargs"],
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[Any]:
        """The task result of job ``result_id``; ``TaskResultDoesNotExist`` when there is no
        such job (never enqueued, or deleted by retention) or it is not a task's."""
        if not isinstance(result_id, str) or not result_id.isdigit() or len(result_id) > 18:
            raise TaskResultDoesNotExist(result_id)
        conn = sync_connection(connections[self.database])
        assert conn is not None  # Django's connections are synchronous
        with conn.cursor(row_factory=pgbeat_rows) as cursor:
            row = cursor.execute(task_sql.JOBS_TASK_RESULT, {"id": int(result_id)}).fetchone()
            if row is None:
                raise TaskResultDoesNotExist(result_id)
            row["payload"] = json.loads(row["payload"])
            row["result"] = None if row["result"] is None else json.loads(row["result"])
            task = _task_of(row["kind"], row["payload"])
            attempts = cursor.execute(attempt_sql.ATTEMPTS_OF_JOB, {"id": row["id"]}).fetchall()
        return _result(self.alias, task, row, attempts)


def pgbeat_rows(cursor: Any) -> Any:
    """Rows as dicts (psycopg's dict_row, imported late: Django may load this module first)."""
    from psycopg.rows import dict_row

    return dict_row(cursor)


def _json(value: Any) -> Any:
    """Arguments as the JSON they are stored as (tuples become lists), or InvalidTaskError."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidTaskError(f"task arguments must be JSON data: {exc}") from None


def _task_of(kind: str, payload: Any) -> Task[Any, Any]:
    """The ``@task`` object a job's kind names, or TaskResultDoesNotExist."""
    if not isinstance(payload, dict) or set(payload) != {"args", "kwargs"}:
        raise TaskResultDoesNotExist(f"job of kind {kind!r} is not a task's")
    try:
        task = import_string(kind)
    except ImportError:
        raise TaskResultDoesNotExist(f"no task {kind!r} in this project") from None
    if not isinstance(task, Task):
        raise TaskResultDoesNotExist(f"{kind!r} is not a task")
    return task


def _result(
    alias: str, task: Task[Any, Any], row: dict[str, Any], attempts: list[dict[str, Any]]
) -> TaskResult[Any]:
    status = STATUS[row["status"]]
    errors = [_error(task, a["error"]) for a in attempts if a["error"]]
    if status == TaskResultStatus.FAILED and not errors:
        errors.append(_error(task, row["last_error"] or "cancelled"))
    workers = [a["worker"] or "pgbeat" for a in attempts]
    workers += ["pgbeat"] * max(0, row["attempts"] - len(workers))
    started: datetime | None = row["started_at"]
    result = TaskResult(
        task=task.using(queue_name=row["queue"], priority=max(-100, min(100, row["priority"]))),
        id=str(row["id"]),
        status=status,
        enqueued_at=row["created_at"],
        started_at=started,
        finished_at=row["finished_at"] if status in (STATUS["done"], STATUS["failed"]) else None,
        last_attempted_at=started,
        args=row["payload"]["args"],
        kwargs=row["payload"]["kwargs"],
        backend=alias,
        errors=errors,
        worker_ids=workers,
    )
    object.__setattr__(result, "_return_value", row["result"])
    return result


def _error(task: Task[Any, Any], text: str) -> TaskError:
    """A recorded error (``Type: message`` and the traceback) as the framework's TaskError.

    pgbeat records the exception's class name only: a builtin's path is ``builtins.Name``,
    a class defined in the task's module is found there, any other keeps its bare name.
    """
    name = text.partition(":")[0].strip() or "Exception"
    if isinstance(getattr(builtins, name, None), type):
        path = f"builtins.{name}"
    elif isinstance(getattr(sys.modules.get(task.func.__module__), name, None), type):
        path = f"{task.func.__module__}.{name}"
    else:
        path = name
    return TaskError(exception_class_path=path, traceback=text)
