"""The claim statements return one and the same row, the one worker/claiming.py decodes
by name: they are composed from the fragments of claim_parts.py (one RETURNING list, one SET
list), and these tests keep it so. Every claim, pgbeat.testing's included, records the
run's start (started_at) by the clock of its lease.
"""

from __future__ import annotations

import re

import pytest

from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.db.sql.jobs import testing as testing_sql
from pgbeat.job import Job
from tests.helpers import claim_statements

CLAIMS = claim_statements()


def test_every_claim_is_tested() -> None:
    assert len(CLAIMS) >= 7, sorted(CLAIMS)


def folded(pattern: str, statement: str) -> str:
    """What ``pattern``'s group matches in ``statement``, whitespace folded."""
    found = re.search(pattern, statement, re.DOTALL)
    assert found is not None
    return " ".join(found.group(1).split())


def returning(statement: str) -> str:
    """The statement's RETURNING list."""
    return folded(r"RETURNING (id, kind, .*?job_key, tags)", statement)


def set_clause(statement: str) -> str:
    """The SET list of the statement's UPDATE that makes jobs running."""
    return folded(r"SET (status = 'running',.*?)\s+WHERE ", statement)


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_every_claim_returns_the_fast_claims_row(name: str) -> None:
    assert returning(CLAIMS[name]) == returning(claim_sql.JOBS_CLAIM)


def test_the_claimed_row_is_decodable_text_and_guarded_dates() -> None:
    row = returning(claim_sql.JOBS_CLAIM)
    assert row.startswith("id, kind, payload::text AS payload, attempts AS attempt,")
    assert row.endswith("unique_key, queue, priority, limit_key, job_key, tags")
    assert row.count("BETWEEN '0001-01-02 00:00:00+00' AND '9999-12-30 00:00:00+00'") == 2


def test_the_claimed_columns_are_named_as_jobs_fields() -> None:
    """The worker picks Job's fields by these names (claimed_rows.job_columns)."""
    names = [
        re.sub(r".*\bAS ", "", column).strip()
        for column in re.split(r",\s*(?![^()]*\))", returning(claim_sql.JOBS_CLAIM))
    ]
    assert names == list(Job._fields)


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_every_claim_records_the_runs_start_by_the_leases_clock(name: str) -> None:
    assert set_clause(CLAIMS[name]).endswith(
        "locked_until = now() + %(lease)s::interval, started_at = now()"
    )


def test_the_testing_drain_records_its_start_at_the_time_it_was_given() -> None:
    assert set_clause(testing_sql.JOBS_CLAIM_NEXT_DUE).endswith(
        "locked_until = coalesce(%(now)s::timestamptz, now()) + %(lease)s::interval, "
        "started_at = coalesce(%(now)s::timestamptz, now())"
    )
