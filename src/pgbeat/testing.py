"""Helpers for an application's own tests: what did this transaction enqueue, and what
happens when those jobs run, on the test's connection, without a worker.

``assert_enqueued`` / ``refute_enqueued`` read the caller's connection, so they see its
uncommitted transaction. ``drain`` runs the due jobs in this process through the worker's
own code (middleware, tracing, the outcome decision and the statements that record it),
one at a time, on that same connection; its clock is the database's or an injected ``now``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import random
import threading
import time
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from pgbeat.backoff import BackoffPolicy
from pgbeat.db import frameworks
from pgbeat.db.guarded import Unreadable, guard
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.db.sql import session as session_sql
from pgbeat.db.sql.jobs import claim_ready as ready_sql
from pgbeat.db.sql.jobs import testing as testing_sql
from pgbeat.errors import UnknownKind
from pgbeat.job import Job, JobContext
from pgbeat.jobs.payloads import json_value
from pgbeat.observe import tracing
from pgbeat.registry import Registry
from pgbeat.worker.executor import Run, call_handler, call_handler_async
from pgbeat.worker.outcomes import _Batch as OutcomeWrite  # the worker's writer of outcomes
from pgbeat.worker.verdict import Outcome, decide

__all__ = ["EnqueuedJob", "assert_enqueued", "drain", "refute_enqueued"]

LISTED = 20  # jobs a failure message lists
# Runs of one drain: past this a handler is likely enqueueing itself. A test's fan-out of
# thousands of children still drains in one call.
DRAIN_LIMIT = 20_000
DRAIN_TIMEOUT = timedelta(minutes=5)  # what a handler's JobContext.timeout says
_FIELDS = (
    "id",
    "status",
    "queue",
    "priority",
    "limit_key",
    "run_at",
    "unique_key",
    "job_key",
    "attempts",
    "max_attempts",
    "last_error",
    "tags",
    "meta",
)


@dataclass(frozen=True)
class EnqueuedJob:
    """One row of ``jobs`` as a test sees it."""

    id: int
    kind: str
    payload: Any
    status: str
    queue: str
    priority: int
    limit_key: str | None
    run_at: datetime
    unique_key: str | None
    job_key: str | None
    attempts: int
    max_attempts: int
    last_error: str | None
    tags: list[str] | None
    meta: Any

    def describe(self) -> str:
        """One line: ``#12 welcome_email {"user_id": 1} pending queue=default run_at=...``."""
        extras = [f"{name}={getattr(self, name)!r}" for name in ("unique_key", "job_key")]
        if self.priority:
            extras.append(f"priority={self.priority}")
        payload = (
            f"<{self.payload}>"
            if isinstance(self.payload, Unreadable)
            else json.dumps(self.payload, sort_keys=True)
        )
        run_at = self.run_at.isoformat() if isinstance(self.run_at, datetime) else self.run_at
        return (
            f"#{self.id} {self.kind} {payload} {self.status} "
            f"queue={self.queue} run_at={run_at} "
            + " ".join(e for e in extras if not e.endswith("=None"))
        ).rstrip()


def assert_enqueued(
    conn: object, kind: str, payload: Any = None, **fields: Any
) -> list[EnqueuedJob]:
    """The jobs of ``kind`` whose payload contains ``payload`` and whose columns equal
    ``fields`` (``queue=``, ``priority=``, ``status=``, ``unique_key=``, ...); at least one.

    ``payload`` matches as a subset: every key given must be there with an equal value
    (nested objects alike); a pydantic model counts as its JSON. Jobs of every status
    match unless ``status=`` says otherwise. Raises ``AssertionError`` listing what was
    enqueued when none matches. Reads ``conn`` (psycopg, SQLAlchemy or Django), inside
    its current transaction.
    """
    found = _matching(conn, kind, payload, fields)
    if not found:
        raise AssertionError(
            f"expected a job {_wanted(kind, payload, fields)}; "
            + _listing(_enqueued(_sync(conn), None))
        )
    return found


def refute_enqueued(conn: object, kind: str, payload: Any = None, **fields: Any) -> None:
    """Raise ``AssertionError`` (listing them) if any job matches as in ``assert_enqueued``."""
    found = _matching(conn, kind, payload, fields)
    if found:
        lines = "\n".join(f"  {job.describe()}" for job in found[:LISTED])
        raise AssertionError(
            f"expected no job {_wanted(kind, payload, fields)}; found {len(found)}:\n{lines}"
        )


def drain(
    conn: object,
    registry: Registry,
    *,
    now: datetime | None = None,
    backoff: BackoffPolicy | None = None,
    schedules: bool = True,
) -> dict[str, int]:
    """Run every job due at ``now`` (default: the database's ``now()``) with ``registry``'s
    handlers, here, on ``conn``; return how many of the jobs it ran ended in each status.

    Jobs a handler enqueues run too when due. A failed run is decided as a worker decides
    (retries with ``backoff``, ``PermanentError``, ``Retry(after=...)``); a retry due
    after ``now`` stays ``pending`` until a drain with a later ``now``. With ``schedules``,
    the periods of the database's schedules due at ``now`` are enqueued first, as a
    scheduler's tick would. Each handler runs in a savepoint: the writes of one that raises
    are rolled back and the caller's transaction stays usable. ``JobContext.connection()``
    lends ``conn`` itself. Inside one transaction the database's ``now()`` does not move:
    pass ``now`` to step time forward.
    """
    if now is not None and now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if not isinstance(registry, Registry):
        raise TypeError(f"registry must be a pgbeat.Registry, not {type(registry).__name__}")
    sync_conn = _sync(conn)
    if schedules:
        _tick_schedules(sync_conn, now)
    runner = _Drainer(sync_conn, registry, now, backoff or BackoffPolicy())
    ran = runner.run_all()
    if not ran:
        return {}
    rows = sync_conn.execute(testing_sql.JOBS_COUNT_STATUS_OF, {"ids": ran}).fetchall()
    return {str(status): int(count) for status, count in rows}


class _Drainer:
    """Claims one due job at a time on the caller's connection and runs it to its outcome."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        registry: Registry,
        now: datetime | None,
        backoff: BackoffPolicy,
    ) -> None:
        self.conn = conn
        self.registry = registry
        self.now = now
        self.backoff = backoff
        self.rng = random.Random(0)  # the same jitter every run: tests stay reproducible
        self.traced = tracing.configured()  # spans as a worker makes them

    def run_all(self) -> list[int]:
        ran: list[int] = []
        while (claimed := self._claim()) is not None:
            if len(ran) >= DRAIN_LIMIT:
                self._give_back(claimed[0])
                raise RuntimeError(
                    f"drain ran {DRAIN_LIMIT} jobs and more are due: does a handler "
                    "enqueue its own kind without a delay?"
                )
            job, meta = claimed
            self._record(self._run(job, meta))
            ran.append(job.id)
        return list(dict.fromkeys(ran))

    def _claim(self) -> tuple[Job, Any] | None:
        row = self._claim_next_due()
        while row is None:
            # A large fan-out's children wait where they are held: released once nothing
            # else is due, one parent at a time, as a worker releases what it did not take
            # in time (claim_ready.py); before every claim, it doubled a drain's statements.
            released = self.conn.execute(
                ready_sql.READY_RELEASE_STALE, {"stale": timedelta(0)}
            ).fetchone()
            if released is None or not (released[0] or released[1]):
                return None
            row = self._claim_next_due()
        job = Job._make(row[:-1])._replace(payload=_decoded(row[2]))
        return job, _decoded(row[-1])

    def _give_back(self, job: Job) -> None:
        """Return a job claimed past the limit to pending, its attempt given back, as a
        worker releases what it did not run."""
        now = time.monotonic()
        run = Run(job, None, None, now, now, settled=True, finished_at=now)
        OutcomeWrite.of(run, Outcome("released", "drain stopped at its limit")).send(self.conn)

    def _claim_next_due(self) -> Any:
        return self.conn.execute(
            testing_sql.JOBS_CLAIM_NEXT_DUE,
            {"now": self.now, "lease": DRAIN_TIMEOUT + timedelta(minutes=1)},
        ).fetchone()

    def _run(self, job: Job, meta: Any) -> Run:
        started = time.monotonic()
        try:
            handler = self.registry.get(job.kind)
        except UnknownKind as exc:
            return Run(job, None, None, started, started, error=exc, settled=True)
        lend = nullcontext(self.conn)
        context = JobContext.for_job(job, DRAIN_TIMEOUT, lambda: lend)
        trace = (meta or {}) if self.traced else None
        run = Run(job, handler, context, float("inf"), started, trace=trace)
        try:
            with self.conn.transaction():  # a savepoint inside the caller's transaction
                if handler.is_async:
                    _run_coroutine(run)
                else:
                    run.result = call_handler(run)  # stored with the outcome, as a worker does
        except Exception as exc:  # the handler's failure is the job's outcome
            run.error = exc
        run.settled = True
        run.finished_at = time.monotonic()
        return run

    def _record(self, run: Run) -> None:
        outcome = decide(run.job, run.error, self.backoff, self.rng)
        if self.now is not None and isinstance(outcome.retry_at, timedelta):
            # The worker's delays count from the database clock; here from the injected one.
            outcome = dataclasses.replace(outcome, retry_at=self.now + outcome.retry_at)
        OutcomeWrite.of(run, outcome).send(self.conn)


def _run_coroutine(run: Run) -> None:
    """Await an async handler on an event loop of its own (in a thread if one runs here)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        run.result = asyncio.run(call_handler_async(run))
        return
    failure: list[BaseException] = []

    def target() -> None:
        try:
            run.result = asyncio.run(call_handler_async(run))
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name="pgbeat-drain")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def _tick_schedules(conn: psycopg.Connection[Any], now: datetime | None) -> None:
    """Enqueue the schedules' periods due at ``now``, as one scheduler tick would."""
    row = conn.execute(schedule_sql.SCHEDULES_ANY).fetchone()
    if row is None or not row[0]:
        return
    from pgbeat.scheduling.scheduler import Scheduler  # only a drain with schedules needs it

    if now is None:
        clock = conn.execute(session_sql.DATABASE_NOW).fetchone()
        assert clock is not None
        now = clock[0]
    frozen = gc.get_freeze_count()
    Scheduler(conn.info.dsn, None, heartbeat=False).tick(conn, now)
    if not frozen:  # the scheduler freezes its long-lived copy; a test process need not
        gc.unfreeze()


def _sync(conn: object) -> psycopg.Connection[Any]:
    found = frameworks.sync_connection(conn)
    if found is None:
        raise TypeError("pgbeat.testing needs a sync connection (psycopg, SQLAlchemy or Django)")
    return found


def _matching(
    conn: object, kind: str, payload: Any, fields: Mapping[str, Any]
) -> list[EnqueuedJob]:
    if not isinstance(kind, str) or not kind:
        raise ValueError("kind must be a non-empty string")
    unknown = sorted(set(fields) - set(_FIELDS))
    if unknown:
        raise TypeError(f"unknown job field(s) {', '.join(unknown)}; known: {', '.join(_FIELDS)}")
    wanted = None if payload is None else json_value(payload)
    return [
        job
        for job in _enqueued(_sync(conn), kind)
        if (wanted is None or contains(job.payload, wanted))
        and all(getattr(job, name) == value for name, value in fields.items())
    ]


def contains(actual: Any, wanted: Any) -> bool:
    """Whether ``wanted`` is a subset of ``actual``: objects by key, recursively; lists and
    scalars equal as JSON (a list's objects whole, ``true`` not ``1``)."""
    if isinstance(wanted, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and contains(actual[key], value) for key, value in wanted.items()
        )
    return _same(actual, wanted)


def _same(actual: Any, wanted: Any) -> bool:
    """Equal as JSON values: ``true`` is not ``1`` (Python's ``True == 1`` notwithstanding)."""
    if isinstance(actual, bool) or isinstance(wanted, bool):
        return actual is wanted
    if isinstance(actual, list) or isinstance(wanted, list):
        return (
            isinstance(actual, list)
            and isinstance(wanted, list)
            and len(actual) == len(wanted)
            and all(map(_same, actual, wanted))
        )
    if isinstance(actual, Mapping) or isinstance(wanted, Mapping):
        return (
            isinstance(actual, Mapping)
            and isinstance(wanted, Mapping)
            and actual.keys() == wanted.keys()
            and all(_same(actual[key], wanted[key]) for key in wanted)
        )
    return bool(actual == wanted)


def _enqueued(conn: psycopg.Connection[Any], kind: str | None) -> list[EnqueuedJob]:
    """The jobs a test looks at; a value Python cannot hold (a run_at of infinity, JSON
    nested too deeply) is an ``Unreadable`` that names itself, never an error that hides
    the other rows."""
    limit = 10_000 if kind is not None else LISTED + 1
    with conn.cursor() as cursor:
        guard(cursor)
        rows = cursor.execute(testing_sql.JOBS_ENQUEUED, {"kind": kind, "limit": limit}).fetchall()
    return [_enqueued_job(row) for row in rows]


def _enqueued_job(row: tuple[Any, ...]) -> EnqueuedJob:
    values = list(row)
    values[2], values[-1] = _decoded(values[2]), _decoded(values[-1])  # payload, meta
    return EnqueuedJob(*values)


def _decoded(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except RecursionError:
        return Unreadable("JSON nested too deeply for Python")


def _wanted(kind: str, payload: Any, fields: Mapping[str, Any]) -> str:
    said = f"of kind {kind!r}"
    if payload is not None:
        said += f" with payload containing {json.dumps(json_value(payload), sort_keys=True)}"
    if fields:
        said += " and " + ", ".join(f"{k}={v!r}" for k, v in fields.items())
    return said


def _listing(jobs: list[EnqueuedJob]) -> str:
    if not jobs:
        return "no job was enqueued"
    shown = jobs[:LISTED]
    lines = "\n".join(f"  {job.describe()}" for job in shown)
    more = "\n  ..." if len(jobs) > LISTED else ""
    return f"enqueued:\n{lines}{more}"
