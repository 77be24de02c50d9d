"""The worker's side of the Django tasks backend (tasks.py): a pgbeat handler for every
``@task`` of a ``PgbeatBackend``, registered under the task's module path (its jobs' kind).

The tasks are found among the loaded modules after the installed apps' ``tasks`` modules
are imported (handlers.py does it), so a task defined in, or imported by, an app's
``tasks.py`` is served. A task defined elsewhere and never imported is not: its jobs wait,
and ``pgbeat status`` names their kind among those no worker claims.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from inspect import iscoroutinefunction
from typing import Any

from django.apps import apps
from django.db import connections

from pgbeat.contrib.django.framework import (
    Task,
    TaskContext,
    TaskResult,
    TaskResultStatus,
    task_finished,
    task_started,
)
from pgbeat.job import JobContext
from pgbeat.registry import Registry


def register_tasks(registry: Registry) -> list[str]:
    """Register a handler on ``registry`` for each task of a PgbeatBackend found in the
    loaded modules of the installed apps; return their kinds."""
    from pgbeat.contrib.django.tasks import PgbeatBackend

    packages = tuple(config.name for config in apps.get_app_configs())
    found: dict[str, Task[Any, Any]] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith(packages) or name.partition(".")[0] == "django":
            continue
        for value in list(getattr(module, "__dict__", {}).values()):
            # type(), not isinstance(): that would set up Django's lazy objects (admin.site)
            if issubclass(type(value), Task):
                found.setdefault(value.module_path, value)
    kinds = []
    for kind, task in sorted(found.items()):
        backend = task.get_backend()
        if isinstance(backend, PgbeatBackend) and kind not in registry:
            registry.register(kind, handler_for(task, backend.alias))
            kinds.append(kind)
    return kinds


def handler_for(task: Task[Any, Any], alias: str) -> Callable[[Any, JobContext], Any]:
    """The pgbeat handler that runs ``task`` with a job's arguments (async for a coroutine)."""
    if iscoroutinefunction(task.func):

        async def run_async(payload: Any, job: JobContext) -> Any:
            result, args, kwargs = _started(task, alias, payload, job)
            call: Awaitable[Any] = (
                task.func(TaskContext(task_result=result), *args, **kwargs)
                if task.takes_context
                else task.func(*args, **kwargs)
            )
            try:
                value = await call
            except BaseException as exc:
                _finished(result, job, exc)
                raise
            return _finished(result, job, value)

        return run_async

    def run(payload: Any, job: JobContext) -> Any:
        _close_old_connections()
        try:
            result, args, kwargs = _started(task, alias, payload, job)
            try:
                value = (
                    task.func(TaskContext(task_result=result), *args, **kwargs)
                    if task.takes_context
                    else task.func(*args, **kwargs)
                )
            except BaseException as exc:
                _finished(result, job, exc)
                raise
            return _finished(result, job, value)
        finally:
            _close_old_connections()

    return run


def _close_old_connections() -> None:
    """Django's close_old_connections, as around a request, but for a connection in a
    transaction: its caller's (``pgbeat.testing.drain`` runs tasks in the caller's thread,
    on its connection, in a savepoint)."""
    for connection in connections.all(initialized_only=True):
        info = getattr(connection.connection, "info", None)
        busy = getattr(info, "transaction_status", 0) != 0  # psycopg: 0 is IDLE
        if not connection.in_atomic_block and not busy:
            connection.close_if_unusable_or_obsolete()


def _started(
    task: Task[Any, Any], alias: str, payload: Any, job: JobContext
) -> tuple[TaskResult[Any], list[Any], dict[str, Any]]:
    args = list(payload.get("args", [])) if isinstance(payload, dict) else []
    kwargs = dict(payload.get("kwargs", {})) if isinstance(payload, dict) else {}
    result = TaskResult(
        task=task,
        id=str(job.id),
        status=TaskResultStatus.RUNNING,
        enqueued_at=job.created_at,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=args,
        kwargs=kwargs,
        backend=alias,
        errors=[],
        worker_ids=["pgbeat"] * job.attempt,
    )
    task_started.send(type(task.get_backend()), task_result=result)
    return result, args, kwargs


def _finished(result: TaskResult[Any], job: JobContext, value: Any) -> Any:
    """Send task_finished for a success, or for the failure of the last attempt."""
    failed = isinstance(value, BaseException)
    if failed and not job.is_last_attempt:
        return value
    status = TaskResultStatus.FAILED if failed else TaskResultStatus.SUCCESSFUL
    object.__setattr__(result, "status", status)
    if not failed:
        object.__setattr__(result, "_return_value", value)
    task_finished.send(type(result.task.get_backend()), task_result=result)
    return value
