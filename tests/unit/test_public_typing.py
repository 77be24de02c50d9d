"""The public API type-checks in a user's ``mypy --strict`` project: a small user module,
with ``assert_type`` on what each call returns, must pass with no error and no ``Any``
leaking out of ``enqueue`` and its siblings."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import run_ok

pytestmark = pytest.mark.slow  # mypy reads pgbeat and its dependencies: seconds

SRC = Path(__file__).resolve().parents[2] / "src"

USER_MODULE = textwrap.dedent(
    '''
    """A user's module, checked with mypy --strict."""
    from __future__ import annotations

    import time
    from collections.abc import Callable
    from datetime import timedelta
    from typing import Any, assert_type

    import psycopg
    import pydantic
    from sqlalchemy.ext.asyncio import AsyncSession
    from sqlalchemy.orm import Session

    import pgbeat
    from pgbeat.testing import EnqueuedJob, assert_enqueued, drain, refute_enqueued


    class Welcome(pydantic.BaseModel):
        user_id: int


    def timing(job: pgbeat.JobContext, call_next: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return call_next()
        finally:
            print(job.kind, time.perf_counter() - started)


    registry = pgbeat.Registry(middleware=[timing])


    @registry.handler("welcome_email")
    def welcome_email(payload: Welcome, job: pgbeat.JobContext) -> None:
        print(payload.user_id, job.attempt, job.queue)


    def sign_up(conn: psycopg.Connection[Any], session: Session) -> int:
        job_id = pgbeat.enqueue(conn, "welcome_email", Welcome(user_id=1))
        assert_type(job_id, int | None)
        assert_type(pgbeat.enqueue(session, "welcome_email", {"user_id": 1}), int | None)
        ids = pgbeat.enqueue_many(conn, [pgbeat.NewJob("welcome_email", {"user_id": 2})])
        assert_type(ids, list[int])
        keyed = pgbeat.enqueue(
            conn, "remind", {}, job_key="u1", on_conflict="replace", delay=timedelta(hours=1)
        )
        assert_type(keyed, int | None)
        assert_type(pgbeat.find(conn, "remind", "u1"), pgbeat.LiveJob | None)
        assert_type(pgbeat.cancel(conn, "remind", "u1"), pgbeat.Cancelled | None)
        assert_type(pgbeat.reschedule(conn, "remind", "u1", delay=timedelta(1)), int | None)
        return job_id or 0


    async def sign_up_async(aconn: psycopg.AsyncConnection[Any], session: AsyncSession) -> None:
        assert_type(await pgbeat.enqueue(aconn, "welcome_email", {}), int | None)
        assert_type(await pgbeat.enqueue(session, "welcome_email", {}), int | None)
        assert_type(await pgbeat.enqueue_async(aconn, "welcome_email", {}), int | None)
        assert_type(await pgbeat.enqueue_many(aconn, []), list[int])
        assert_type(await pgbeat.find(aconn, "remind", "u1"), pgbeat.LiveJob | None)


    def a_test(conn: psycopg.Connection[Any]) -> None:
        jobs = assert_enqueued(conn, "welcome_email", {"user_id": 1}, status="pending")
        assert_type(jobs, list[EnqueuedJob])
        refute_enqueued(conn, "welcome_email", {"user_id": 2})
        assert_type(drain(conn, registry), dict[str, int])
    '''
)


def test_a_user_module_passes_mypy_strict(tmp_path: Path) -> None:
    module = tmp_path / "user_app.py"
    module.write_text(USER_MODULE)
    env = {**os.environ, "MYPYPATH": str(SRC)}
    mypy = [sys.executable, "-m", "mypy", "--strict", "--warn-return-any", "--cache-dir"]
    run_ok([*mypy, tmp_path / "cache", "--python-version", "3.11", module], tmp_path, env)
