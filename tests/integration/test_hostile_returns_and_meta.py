"""What a handler returns and what a job's ``meta`` holds are each one job's problem: a
return value whose JSON encoding raises fails that job alone with a readable error, and a
``meta`` nested 5,000 deep, or with a ``traceparent`` that is not text, never stops a worker
with tracing configured (the worker reads meta's two trace keys as text, never decodes it)."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from tests.helpers import in_thread, run_python


class Unencodable(dict[str, Any]):
    """A dict whose items() raises: the JSON encoder calls it."""

    def items(self) -> Any:
        raise RuntimeError("items() of this value raises")


@pytest.fixture
def worker(database_url: str) -> Iterator[pgbeat.Worker]:
    registry = pgbeat.Registry()
    registry.register("odd_result", lambda payload: Unencodable(a=1))
    registry.register("fine", lambda payload: {"ok": True})
    settings = pgbeat.WorkerSettings(heartbeat=False, poll_interval=timedelta(milliseconds=100))
    worker = pgbeat.Worker(database_url, registry, settings)
    with in_thread(worker):
        yield worker


def test_a_return_value_whose_encoding_raises_fails_its_job_alone(
    conn: psycopg.Connection[Any], worker: pgbeat.Worker
) -> None:
    odd = pgbeat.enqueue(conn, "odd_result", {}, max_attempts=1)
    fine = pgbeat.enqueue(conn, "fine", {})
    assert odd is not None and fine is not None
    state = pgbeat.wait(conn, odd, timeout=30)
    assert state.status == "failed"
    assert state.last_error is not None and "items() of this value raises" in state.last_error
    assert pgbeat.wait(conn, fine, timeout=30).status == "done"
    later = pgbeat.enqueue(conn, "fine", {})  # the worker is still working
    assert later is not None and pgbeat.wait(conn, later, timeout=30).status == "done"
    assert not worker.stopped.is_set()


TRACED_WORKER = textwrap.dedent(
    """
    import sys, threading, time
    import psycopg
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    trace.set_tracer_provider(TracerProvider())
    import pgbeat
    url = sys.argv[1]
    registry = pgbeat.Registry()
    registry.register("traced", lambda payload: None)
    worker = pgbeat.Worker(url, registry, pgbeat.WorkerSettings(heartbeat=False))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    with psycopg.connect(url, autocommit=True) as conn:
        while conn.execute(
            "SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')"
        ).fetchone()[0]:
            assert not worker.stopped.is_set(), "the worker stopped"
            assert time.monotonic() < deadline, "jobs did not finish"
            time.sleep(0.05)
        rows = conn.execute("SELECT id, status FROM jobs ORDER BY id").fetchall()
    worker.stop()
    thread.join(30)
    print(rows)
    """
)


@pytest.mark.slow  # a worker in a fresh interpreter
def test_odd_meta_never_stops_a_traced_worker(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    pytest.importorskip("opentelemetry.sdk")
    deep = "[" * 5000 + "]" * 5000
    metas = [
        json.dumps({"traceparent": 1}),
        '{"traceparent": ' + deep + "}",
        deep,
        '"text"',
        json.dumps({"traceparent": "00-" + "f" * 32 + "-" + "e" * 16 + "-01", "x": [1]}),
    ]
    for meta in metas:
        conn.execute(
            "INSERT INTO jobs (kind, payload, meta) VALUES ('traced', '{}', %s::jsonb)", (meta,)
        )
    run_python(TRACED_WORKER, database_url)
    statuses = conn.execute("SELECT status FROM jobs").fetchall()
    assert statuses == [("done",)] * len(metas)
