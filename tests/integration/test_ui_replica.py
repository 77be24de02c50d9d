"""`pgbeat ui --replica-url`: the pages read from a standby, the actions write to the primary.

A primary and an asynchronous standby of the test's own (tests/chaos/clusters.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import psycopg
import pytest

import pgbeat
from pgbeat.db.migrate import apply_migrations
from tests.chaos.clusters import ReplicatedPair, unavailable_reason
from tests.helpers import wait_for
from tests.integration.test_ui_http import csrf_of
from tests.integration.ui_support import dashboard


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicatedPair]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    clusters = ReplicatedPair(synchronous=False)
    try:
        with psycopg.connect(clusters.primary.url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE pgbeat")
        with psycopg.connect(clusters.primary.url("pgbeat"), autocommit=True) as conn:
            apply_migrations(conn)
        yield clusters
    finally:
        clusters.close()


def _ui_backends(url: str) -> list[Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'pgbeat-ui%'"
        )
        return sorted(row[0] for row in rows)


@pytest.mark.slow
def test_pages_read_from_the_standby_and_actions_write_to_the_primary(
    pair: ReplicatedPair,
) -> None:
    primary, standby = pair.primary.url("pgbeat"), pair.standby.url("pgbeat")
    with psycopg.connect(primary, autocommit=True) as conn:
        job = pgbeat.enqueue(conn, "replica_probe", {}, delay=timedelta(hours=1))
    wait_for(pair.standby_caught_up, timeout=15, message="the standby to replay the job")
    with (
        dashboard(primary, replica_url=standby) as ui,
        httpx.Client(base_url=ui.origin, timeout=10) as client,
    ):
        page = client.get(f"{ui.url}/jobs/{job}")
        assert page.status_code == 200 and "replica_probe" in page.text
        assert "pgbeat-ui-replica" in _ui_backends(standby)
        assert "pgbeat-ui-replica" not in _ui_backends(primary)
        # "run now" is an action: it must reach the primary (the standby refuses writes)
        form = {"csrf": csrf_of(page.text)}
        response = client.post(f"{ui.url}/jobs/{job}/run-now", data=form, follow_redirects=False)
        assert response.status_code in (200, 303), response.text[:500]
    with psycopg.connect(primary, autocommit=True) as conn:
        row = conn.execute("SELECT run_at <= now() FROM jobs WHERE id = %s", (job,)).fetchone()
    assert row == (True,)
