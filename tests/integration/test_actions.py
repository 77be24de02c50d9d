"""jobs/actions.py: each operator action run through the CLI and through the dashboard, on
twin sets of jobs, leaves the same rows.

Each face gets its own kind (so job keys of one set never meet the other's) and the same
jobs in every state an action can meet: pending, running, done, failed, cancelled, a failed
job whose key a live job holds, and two failed jobs of one key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import psycopg
import pytest

import pgbeat
from pgbeat.cli.main import main as cli_main
from tests.integration.ui_support import ADMIN_TOKEN, Dashboard, dashboard

CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')
# What an action may change, and what must match between the faces (ids and kinds differ).
COLUMNS = """
SELECT status, attempts, run_at <= now() + interval '1 minute' AS due,
       finished_at IS NOT NULL AS finished, locked_until IS NOT NULL AS locked,
       cancel_requested_at IS NOT NULL AS stopping, superseded_at IS NOT NULL AS superseded,
       result, regexp_replace(coalesce(last_error, ''), '^cancelled: .*$', 'cancelled: <who>')
           AS last_error
FROM jobs WHERE id = %s"""


def _twin(conn: psycopg.Connection[Any], kind: str) -> dict[str, int]:
    """One job in each state an action can meet, of ``kind``; their ids by name."""

    def job(status: str, key: str | None = None, attempts: int = 1) -> int:
        job_id = pgbeat.enqueue(conn, kind, {"n": 1}, job_key=key, max_attempts=3)
        assert job_id is not None
        conn.execute(
            """
            UPDATE jobs SET status = %(status)s, attempts = %(attempts)s,
                   locked_until = CASE WHEN %(status)s = 'running'
                                       THEN now() + interval '5 minutes' END,
                   finished_at = CASE WHEN %(status)s IN ('done', 'failed', 'cancelled')
                                      THEN now() END,
                   last_error = CASE WHEN %(status)s IN ('failed', 'cancelled')
                                     THEN 'ValueError: no' END,
                   result = CASE WHEN %(status)s = 'done' THEN '{"ok": true}'::jsonb END
            WHERE id = %(id)s""",
            {"status": status, "attempts": attempts, "id": job_id},
        )
        return job_id

    ids = {
        "pending": job("pending", attempts=0),
        "running": job("running"),
        "done": job("done"),
        "failed": job("failed", attempts=3),
        "cancelled": job("cancelled"),
        "held": job("failed", "user:1", attempts=3),
    }
    ids["holder"] = job("pending", "user:1", attempts=0)  # user:1 is live again
    ids["older"] = job("failed", "user:2", attempts=3)
    ids["newer"] = job("failed", "user:2", attempts=3)
    return ids


def _rows(conn: psycopg.Connection[Any], ids: dict[str, int]) -> dict[str, tuple[Any, ...]]:
    return {name: conn.execute(COLUMNS, (job_id,)).fetchone() or () for name, job_id in ids.items()}


def _cli(database_url: str, *argv: str) -> int:
    try:
        return cli_main([*argv, "--database-url", database_url])
    except SystemExit as exc:  # argparse and refusals exit
        return int(exc.code or 0)


@contextmanager
def _admin(ui: Dashboard) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=ui.origin, timeout=10) as client:
        page = client.get(f"{ui.url}/login")
        csrf = CSRF.search(page.text)
        assert csrf is not None
        response = client.post(
            f"{ui.url}/login",
            data={"token": ADMIN_TOKEN, "csrf": csrf.group(1), "next": f"{ui.url}/jobs"},
        )
        assert response.status_code == 303, response.text
        yield client


def _post(client: httpx.Client, ui: Dashboard, path: str, data: dict[str, Any]) -> None:
    csrf = CSRF.search(client.get(f"{ui.url}/jobs").text)
    assert csrf is not None
    response = client.post(f"{ui.url}{path}", data={"csrf": csrf.group(1), **data})
    assert response.status_code == 303, response.text


@pytest.fixture
def ui(database_url: str) -> Iterator[Dashboard]:
    with dashboard(database_url, token=ADMIN_TOKEN) as running:
        yield running


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_one_job_at_a_time_leaves_the_same_rows(
    action: str, database_url: str, conn: psycopg.Connection[Any], ui: Dashboard
) -> None:
    """``pgbeat jobs retry|cancel ID`` and the job page's button, job by job."""
    by_cli, by_ui = _twin(conn, "cli_face"), _twin(conn, "ui_face")
    refused = 0
    for name in by_cli:
        refused += _cli(database_url, "jobs", action, str(by_cli[name])) != 0
    with _admin(ui) as client:
        for name in by_ui:
            _post(client, ui, f"/jobs/{by_ui[name]}/{action}", {})
    assert _rows(conn, by_cli) == _rows(conn, by_ui)
    assert 0 < refused < len(by_cli)  # some were refused, some acted on: the test saw both


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_many_jobs_at_once_leave_the_same_rows(
    action: str, database_url: str, conn: psycopg.Connection[Any], ui: Dashboard
) -> None:
    """The CLI's bulk form (`jobs retry --failed --kind K`, or each id for cancel) and the
    dashboard's checked rows: the same statement on the same jobs."""
    by_cli, by_ui = _twin(conn, "cli_face"), _twin(conn, "ui_face")
    if action == "retry":
        assert _cli(database_url, "jobs", "retry", "--failed", "--kind", "cli_face") == 0
        chosen = [by_ui[n] for n in ("failed", "held", "older", "newer")]  # the failed ones
    else:
        for name in by_cli:
            _cli(database_url, "jobs", "cancel", str(by_cli[name]))
        chosen = list(by_ui.values())
    with _admin(ui) as client:
        _post(client, ui, "/jobs/bulk", {"action": action, "scope": "checked", "ids": chosen})
    cli_rows, ui_rows = _rows(conn, by_cli), _rows(conn, by_ui)
    assert cli_rows == ui_rows
    if action == "retry":  # of the key's two failed jobs only the newer; the held one stays
        assert [cli_rows[n][0] for n in ("older", "newer", "held")] == [
            "failed",
            "pending",
            "failed",
        ]
    else:  # a running job is told to stop by either face
        assert cli_rows["running"][0] == "running" and cli_rows["running"][5] is True
