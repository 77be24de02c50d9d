"""What a documented role may not do is reported as not done: ``cancel_job`` run as a role
that row-level security stops from changing the job (pgbeat_keys reaches only jobs with a
job_key) says the cancel was not accepted, and the job still runs."""

from __future__ import annotations

from typing import Any

import psycopg

import pgbeat
from tests.integration.test_least_privilege import logins  # noqa: F401  (a fixture)


def test_a_cancel_row_level_security_stops_is_not_accepted(
    logins: dict[str, str],  # noqa: F811
    conn: psycopg.Connection[Any],
) -> None:
    job_id = pgbeat.enqueue(conn, "noop", {})  # no job_key: out of pgbeat_keys' reach
    assert job_id is not None
    with psycopg.connect(logins["keys"], autocommit=True) as keys:
        result = pgbeat.cancel_job(keys, job_id)
    assert (result.previous_status, result.refused, result.accepted) == ("pending", True, False)
    row = conn.execute("SELECT status FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row == ("pending",)
    keyed = pgbeat.enqueue(conn, "noop", {}, job_key="k")  # in its reach: accepted
    assert keyed is not None
    with psycopg.connect(logins["keys"], autocommit=True) as keys:
        assert pgbeat.cancel_job(keys, keyed).accepted
