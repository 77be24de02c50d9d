"""What the steering tests share: the steer app's tables, an in-process worker, and
readers of a job's row, attempts and executions."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pydantic
import pytest

import pgbeat
from tests import helpers
from tests.apps.steer_app import SETUP
from tests.apps.steer_app import registry as steer_registry


class Report(pydantic.BaseModel):
    rows: int
    name: str


@pytest.fixture(name="tables")
def tables_fixture(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """The steer app's tables, created on ``conn``."""
    conn.execute(SETUP.encode())
    return conn


@pytest.fixture(name="worker")
def worker_fixture(database_url: str, tables: psycopg.Connection[Any]) -> Iterator[pgbeat.Worker]:
    """An in-process worker of the steer app's registry, stopped after the test."""
    with running_worker(database_url, steer_registry) as worker:
        yield worker


def running_worker(url: str, registry: pgbeat.Registry, **settings: Any) -> Any:
    """A worker in a thread (tests.helpers.running_worker), polling every 200 ms, no beats."""
    settings.setdefault("poll_interval", timedelta(milliseconds=200))
    settings.setdefault("heartbeat", False)
    return helpers.running_worker(url, registry, **settings)


def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cursor:
        row = cursor.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row


def attempts_of(conn: psycopg.Connection[Any], job_id: int) -> list[str]:
    rows = conn.execute(
        "SELECT outcome FROM pgbeat_job_attempts WHERE job_id = %s ORDER BY finished_at",
        (job_id,),
    ).fetchall()
    return [r[0] for r in rows]


def started(conn: psycopg.Connection[Any], job_id: int) -> int:
    row = conn.execute("SELECT count(*) FROM executions WHERE job_id = %s", (job_id,)).fetchone()
    assert row is not None
    return int(row[0])
