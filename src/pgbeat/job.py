"""A claimed job as a worker sees it, and the context a handler may ask for."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, NamedTuple

import psycopg

from pgbeat.db.sql import workflows as workflow_sql

ConnectionFactory = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]


class Job(NamedTuple):
    """One row of ``jobs`` as returned by a claim; ``attempt`` already counts this run.

    A named tuple because a busy worker builds tens of thousands a second.
    """

    id: int
    kind: str
    payload: Any
    attempt: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    unique_key: str | None
    queue: str = "default"
    priority: int = 0
    limit_key: str | None = None
    job_key: str | None = None
    tags: list[str] | None = None


@dataclass(frozen=True)
class JobContext:
    """What a handler may learn about the job it runs (its optional second parameter).

    ``cancelled`` is set when someone cancels the running job (``pgbeat.cancel_job``,
    ``pgbeat.cancel``), its timeout passes, its lease could not be renewed, or the worker
    gives up on it at shutdown: a synchronous handler cannot be interrupted, but it can
    check this event between steps and return early. ``connection()`` lends a connection
    to the worker's database from a pool (autocommit; open a transaction with
    ``conn.transaction()``).
    """

    id: int
    kind: str
    attempt: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    unique_key: str | None
    timeout: timedelta
    queue: str = "default"
    priority: int = 0
    limit_key: str | None = None
    job_key: str | None = None
    tags: tuple[str, ...] = ()  # free text given at enqueue, for logs and routing
    cancelled: threading.Event = field(default_factory=threading.Event, compare=False)
    connection_factory: ConnectionFactory | None = field(default=None, compare=False, repr=False)

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection to the worker's database, for the handler's own queries."""
        if self.connection_factory is None:
            raise RuntimeError("this job context has no database connection")
        return self.connection_factory()

    @cached_property
    def parent_results(self) -> dict[str, Any]:
        """The stored results of this workflow step's parents, by step name (read once, on
        first use; ``{}`` for a job of no workflow). A parent that ended without a result
        (``on_parent_failure="run"`` after a failure) maps to None."""
        with self.connection() as conn:
            rows = conn.execute(workflow_sql.WORKFLOW_PARENT_RESULTS, {"id": self.id}).fetchall()
        return {str(name): result for name, result in rows}

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    @classmethod
    def for_job(
        cls, job: Job, timeout: timedelta, connection_factory: ConnectionFactory | None = None
    ) -> JobContext:
        return cls(
            id=job.id,
            kind=job.kind,
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            run_at=job.run_at,
            created_at=job.created_at,
            unique_key=job.unique_key,
            timeout=timeout,
            queue=job.queue,
            priority=job.priority,
            limit_key=job.limit_key,
            job_key=job.job_key,
            tags=tuple(job.tags or ()),
            connection_factory=connection_factory,
        )
