"""OpenTelemetry traces: the enqueue's trace context travels in ``jobs.meta``, and each run
is a CONSUMER span ``process <kind>`` under it (a retry links to it instead).

Optional (``pip install 'pgbeat[otel]'``): without ``opentelemetry-api`` installed, ``ACTIVE``
is False and the worker and ``enqueue`` skip this module's work with one test of a constant.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from pgbeat.db.sql.jobs import meta as meta_sql
from pgbeat.job import Job
from pgbeat.version import __version__

try:
    from opentelemetry import context as otel_context
    from opentelemetry import propagate, trace
except ImportError:  # the extra is not installed: tracing is off, at no cost
    ACTIVE = False
else:
    ACTIVE = True

T = TypeVar("T")
SYSTEM = "pgbeat"  # messaging.system
# What jobs.meta keeps of the injected context: never baggage (it may carry a user's
# e-mail address, which the dashboard's viewers would then read).
TRACE_KEYS = ("traceparent", "tracestate")


def configured() -> bool:
    """Whether an application installed a tracer provider (not the API's no-op default)."""
    if not ACTIVE:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


class ProviderCheck:
    """Whether tracing is configured, for a loop that asks at every claim: once a second
    at most while it is not (an application may install its provider after its worker
    started), and for good once it is (OpenTelemetry sets a process's provider once).

    ``configured()`` itself cost 1 µs alone and 10 beside a worker's threads (a µs a job
    for a worker of 10 slots, whose claim loop asked it at every claim).
    """

    RECHECK = 1.0  # seconds between two asks while tracing is off

    def __init__(self) -> None:
        self._on = False
        self._next = 0.0  # monotonic: when to ask again

    def __call__(self, now: float) -> bool:
        if self._on:
            return True
        if now >= self._next:
            self._on = configured()
            self._next = now + self.RECHECK
        return self._on


def current_meta() -> dict[str, str] | None:
    """The current trace context as ``jobs.meta`` keeps it (``traceparent``, ``tracestate``);
    None without a recording span (or without OpenTelemetry)."""
    if not ACTIVE:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    kept = {key: value for key, value in carrier.items() if key in TRACE_KEYS}
    return kept or None


def meta_param() -> Jsonb | None:
    """``current_meta()`` as the ``%(meta)s`` parameter of the insert statements."""
    if not ACTIVE:
        return None
    meta = current_meta()
    return None if meta is None else Jsonb(meta)


def enqueue_contexts(conn: psycopg.Connection[Any], jobs: Sequence[Job]) -> dict[int, Any]:
    """Each claimed job's span parent by id: its ``meta``, ``{}`` when it has none (a root
    span). One query; the caller asks it only when tracing is configured (ProviderCheck),
    and without it no job is traced.
    """
    if not jobs:
        return {}
    rows = conn.execute(meta_sql.JOBS_META, {"ids": [job.id for job in jobs]}).fetchall()
    found = {int(row[0]): _carrier(row[1], row[2]) for row in rows}
    return {job.id: found.get(job.id, {}) for job in jobs}


def _carrier(traceparent: str | None, tracestate: str | None) -> dict[str, str]:
    """The headers a propagator reads, from a meta's two keys (as text: never decoded)."""
    carrier = {"traceparent": traceparent, "tracestate": tracestate}
    return {key: value for key, value in carrier.items() if value is not None}


def run_in_span(job: Job, meta: Any, call: Callable[[], T]) -> T:
    """Call a sync handler inside the job's span (current on this thread while it runs)."""
    with _start_span(job, meta):
        return call()


async def run_in_span_async(job: Job, meta: Any, call: Callable[[], Awaitable[T]]) -> T:
    """Await an async handler inside the job's span (current in its task while it runs)."""
    with _start_span(job, meta):
        return await call()


def attributes(job: Job) -> dict[str, str | int]:
    """The span's attributes, after OpenTelemetry's semantic conventions for messaging."""
    return {
        "messaging.system": SYSTEM,
        "messaging.operation": "process",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.id),
        "pgbeat.job.kind": job.kind,
        "pgbeat.job.attempt": job.attempt,
    }


def _start_span(job: Job, meta: Any) -> Any:
    """The run's span: a child of the enqueue's context, or (a retry) a root linking to it.

    A retry hours later would otherwise stretch the enqueueing request's trace over hours.
    """
    tracer = trace.get_tracer("pgbeat", __version__)
    parent = _parent(meta)
    links = []
    if job.attempt > 1:
        linked = trace.get_current_span(parent).get_span_context()
        if linked.is_valid:
            links.append(trace.Link(linked))
        parent = otel_context.Context()
    return tracer.start_as_current_span(
        f"process {job.kind}",
        context=parent,
        kind=trace.SpanKind.CONSUMER,
        attributes=attributes(job),
        links=links,
    )


def _parent(meta: Any) -> Any:
    """The enqueue's context from a meta; a root's when it holds none that can be read."""
    if not isinstance(meta, Mapping):
        return otel_context.Context()
    try:
        return propagate.extract(meta)
    except Exception:  # a propagator an application installed may raise on odd values
        return otel_context.Context()
