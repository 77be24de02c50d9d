"""OpenTelemetry traces, end to end: the enqueue's context in ``jobs.meta``, a real worker's
CONSUMER span under it, a retry's span linking to it, and nothing at all without the package.

Each case runs in a fresh interpreter: a tracer provider is process-wide and set once, and
"OpenTelemetry not installed" is simulated there by blocking its import.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import psycopg
import pytest

from tests.helpers import run_python

pytest.importorskip("opentelemetry.sdk")

pytestmark = pytest.mark.slow  # a worker in a fresh interpreter: a few seconds

TRACED = textwrap.dedent(
    """
    import json, sys, threading, time
    from datetime import timedelta
    import psycopg
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    import pgbeat
    url = sys.argv[1]
    registry = pgbeat.Registry()

    @registry.handler("welcome_email")
    def welcome(payload, job):
        with trace.get_tracer("app").start_as_current_span("send email"):
            pass

    @registry.handler("flaky")
    def flaky(payload, job):
        if job.attempt == 1:
            raise pgbeat.Retry(after=timedelta(milliseconds=1))

    tracer = trace.get_tracer("app")
    with psycopg.connect(url) as conn:
        with tracer.start_as_current_span("POST /users") as request:
            pgbeat.enqueue(conn, "welcome_email", {"user_id": 1})
            pgbeat.enqueue_many(conn, [pgbeat.NewJob("flaky", {})])
        conn.commit()
        metas = conn.execute("SELECT kind, meta FROM jobs ORDER BY id").fetchall()
    worker = pgbeat.Worker(url, registry, pgbeat.WorkerSettings(heartbeat=False))
    thread = threading.Thread(target=worker.run)
    thread.start()
    deadline = time.monotonic() + 30
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()[0] < 2:
            assert time.monotonic() < deadline, "jobs did not finish"
            time.sleep(0.02)
    worker.stop()
    thread.join(30)
    spans = [
        {
            "name": s.name,
            "kind": s.kind.name,
            "trace": format(s.context.trace_id, "032x"),
            "id": format(s.context.span_id, "016x"),
            "parent": format(s.parent.span_id, "016x") if s.parent else None,
            "links": [format(l.context.span_id, "016x") for l in s.links],
            "attributes": dict(s.attributes),
        }
        for s in exporter.get_finished_spans()
    ]
    request_context = request.get_span_context()
    print(json.dumps({
        "request": {"trace": format(request_context.trace_id, "032x"),
                    "id": format(request_context.span_id, "016x")},
        "metas": [[kind, meta] for kind, meta in metas],
        "spans": spans,
    }))
    """
)

UNTRACED = textwrap.dedent(
    """
    import sys
    sys.modules["opentelemetry"] = None  # as if the package were not installed
    import psycopg
    import pgbeat
    from pgbeat.observe import tracing
    from pgbeat.testing import drain
    assert not tracing.ACTIVE
    registry = pgbeat.Registry()
    registry.register("ok", lambda payload: None)
    with psycopg.connect(sys.argv[1]) as conn:
        pgbeat.enqueue(conn, "ok", {})
        print(drain(conn, registry), conn.execute("SELECT meta FROM jobs").fetchone()[0])
    """
)


def test_a_job_runs_in_a_consumer_span_under_its_enqueue(database_url: str) -> None:
    out: dict[str, Any] = json.loads(run_python(TRACED, database_url, timeout=90))
    request = out["request"]
    for _, meta in out["metas"]:
        assert meta["traceparent"].startswith(f"00-{request['trace']}-{request['id']}-")
    spans = {(s["name"], s["attributes"].get("pgbeat.job.attempt")): s for s in out["spans"]}
    welcome = spans[("process welcome_email", 1)]
    assert welcome["kind"] == "CONSUMER"
    assert (welcome["trace"], welcome["parent"]) == (request["trace"], request["id"])
    assert welcome["attributes"]["messaging.system"] == "pgbeat"
    assert welcome["attributes"]["messaging.operation"] == "process"
    assert welcome["attributes"]["messaging.destination.name"] == "default"
    assert welcome["attributes"]["messaging.message.id"] == "1"  # the first job's id
    (child,) = [s for s in out["spans"] if s["name"] == "send email"]
    assert (child["trace"], child["parent"]) == (welcome["trace"], welcome["id"])

    first, retry = spans[("process flaky", 1)], spans[("process flaky", 2)]
    assert first["parent"] == request["id"]
    assert retry["parent"] is None and retry["trace"] != request["trace"]
    assert retry["links"] == [request["id"]]


def test_without_opentelemetry_nothing_is_stored_and_jobs_run(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    assert run_python(UNTRACED, database_url, timeout=90).split() == ["{'done':", "1}", "None"]
