"""pgbeat: background jobs and replica-safe cron schedules on PostgreSQL.

The public API, re-exported from the modules that implement it. ``pgbeat.ui`` (the
dashboard, with the ``ui`` extra) and ``pgbeat.testing`` load on first use.
"""

import importlib
from typing import Any

from pgbeat.backoff import BackoffPolicy
from pgbeat.db.migrate import apply_migrations, apply_migrations_async
from pgbeat.errors import (
    DatabaseUnavailable,
    KeyContended,
    NotMigrated,
    PayloadError,
    PermanentError,
    PgbeatError,
    Retry,
    ScheduleConflict,
    ScheduleError,
    ScheduleNotFound,
    Snooze,
    UnknownKind,
)
from pgbeat.job import Job, JobContext
from pgbeat.jobs.control import (
    CancelResult,
    JobResult,
    cancel_job,
    cancel_job_async,
    wait,
    wait_async,
)
from pgbeat.jobs.enqueue import NewJob, enqueue, enqueue_async, enqueue_many, enqueue_many_async
from pgbeat.jobs.keys import (
    Cancelled,
    LiveJob,
    cancel,
    cancel_async,
    find,
    find_async,
    reschedule,
    reschedule_async,
)
from pgbeat.jobs.queues import (
    QueueSettings,
    configure_queue,
    configure_queue_async,
    pause_queue,
    pause_queue_async,
    resume_queue,
    resume_queue_async,
)
from pgbeat.jobs.workflow_definition import Step, Workflow
from pgbeat.jobs.workflows import (
    CancelledWorkflow,
    EnqueuedWorkflow,
    WorkflowState,
    WorkflowStep,
    cancel_workflow,
    cancel_workflow_async,
    enqueue_workflow,
    enqueue_workflow_async,
    workflow,
    workflow_async,
)
from pgbeat.registry import Registry
from pgbeat.scheduling.api import (
    delete_schedule,
    delete_schedule_async,
    upsert_schedule,
    upsert_schedule_async,
)
from pgbeat.version import __version__
from pgbeat.worker.settings import WorkerSettings
from pgbeat.worker.worker import Worker

__all__ = [
    "BackoffPolicy",
    "CancelResult",
    "Cancelled",
    "CancelledWorkflow",
    "DatabaseUnavailable",
    "EnqueuedWorkflow",
    "Job",
    "JobContext",
    "JobResult",
    "KeyContended",
    "LiveJob",
    "NewJob",
    "NotMigrated",
    "PayloadError",
    "PermanentError",
    "PgbeatError",
    "QueueSettings",
    "Registry",
    "Retry",
    "ScheduleConflict",
    "ScheduleError",
    "ScheduleNotFound",
    "Snooze",
    "Step",
    "UnknownKind",
    "Worker",
    "WorkerSettings",
    "Workflow",
    "WorkflowState",
    "WorkflowStep",
    "__version__",
    "apply_migrations",
    "apply_migrations_async",
    "cancel",
    "cancel_async",
    "cancel_job",
    "cancel_job_async",
    "cancel_workflow",
    "cancel_workflow_async",
    "configure_queue",
    "configure_queue_async",
    "delete_schedule",
    "delete_schedule_async",
    "enqueue",
    "enqueue_async",
    "enqueue_many",
    "enqueue_many_async",
    "enqueue_workflow",
    "enqueue_workflow_async",
    "find",
    "find_async",
    "pause_queue",
    "pause_queue_async",
    "reschedule",
    "reschedule_async",
    "resume_queue",
    "resume_queue_async",
    "upsert_schedule",
    "upsert_schedule_async",
    "wait",
    "wait_async",
    "workflow",
    "workflow_async",
]

_LAZY = ("testing", "ui")


def __getattr__(name: str) -> Any:
    """``pgbeat.ui`` and ``pgbeat.testing`` after a plain ``import pgbeat`` (PEP 562).

    Imported on first use: the dashboard needs its extra's packages, and neither belongs
    in the import of every worker and web process.
    """
    if name in _LAZY:
        return importlib.import_module(f"pgbeat.{name}")
    raise AttributeError(f"module 'pgbeat' has no attribute {name!r}")
