"""The dashboard under its own roles (docs/least-privilege.sql): ``pgbeat_ui_viewer`` serves
every page of a read-only dashboard, ``pgbeat_ui_admin`` every page and every action, and
neither may do more (the plain-SQL matrix in test_least_privilege.py shows the "more")."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.integration.test_least_privilege import GRANTS, GROUP_NAME, GROUPS, role_url
from tests.integration.ui_support import (
    dashboard,
    fresh_database,
    seed_jobs,
    sync_schedules,
    write_schedules,
)

CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')
HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)">')


@pytest.fixture(scope="module")
def roles_database(
    server_url: str, template_name: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, dict[str, str], Path]]:
    """A seeded database with the roles applied: (owner URL, group -> login URL, schedules)."""
    suffix = uuid.uuid4().hex[:8]
    with fresh_database(server_url, template_name) as url:
        schedules = write_schedules(tmp_path_factory.mktemp("ui-roles"))
        sync_schedules(url, schedules)
        logins: dict[str, str] = {}
        with psycopg.connect(url, autocommit=True) as conn:
            seed_jobs(conn)
            conn.execute(GROUP_NAME.sub(lambda m: f"{m.group(0)}_{suffix}", GRANTS).encode())
            for group in ("ui_viewer", "ui_admin"):
                login = f"login_{group}_{suffix}"
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                        sql.Identifier(login), sql.Identifier(f"pgbeat_{group}_{suffix}")
                    )
                )
                logins[group] = role_url(url, login)
        yield url, logins, schedules
    # the roles own objects in the database just dropped only: they go now
    roles = [f"login_{g}_{suffix}" for g in ("ui_viewer", "ui_admin")] + [
        f"pgbeat_{g}_{suffix}" for g in GROUPS
    ]
    with psycopg.connect(server_url, autocommit=True) as conn:
        for role in roles:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def _one(url: str, query: str, *params: Any) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query.encode(), params).fetchone()
    return None if row is None else row[0]


def _row(url: str, query: str, *params: Any) -> tuple[Any, ...] | None:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query.encode(), params).fetchone()


def _job(url: str, status: str) -> int:
    return int(
        _one(
            url,
            "INSERT INTO jobs (kind, payload, status, finished_at) VALUES ('email', '{}', %s, "
            "CASE WHEN %s IN ('done', 'failed') THEN now() END) RETURNING id",
            status,
            status,
        )
    )


def _pages(url: str, job: int) -> list[str]:
    return [
        "/", "/failures", "/failures?window=24h", "/processes", "/jobs", "/jobs?status=failed",
        "/jobs?kind=email&status=pending", f"/jobs/{job}", "/jobs?schedule=nightly_report",
        "/schedules", "/schedules/nightly_report", "/schedules/heartbeat",
    ]  # fmt: skip


def test_the_viewer_role_serves_every_page_read_only(
    roles_database: tuple[str, dict[str, str], Path],
) -> None:
    owner, logins, _schedules = roles_database
    job = _job(owner, "failed")
    with (
        dashboard(logins["ui_viewer"], read_only=True) as ui,
        httpx.Client(base_url=ui.origin, timeout=10) as client,
    ):
        for path in _pages(owner, job):
            page = client.get(path)
            assert page.status_code == 200, (path, page.text[:500])
            assert "permission denied" not in page.text, path


def test_the_admin_role_serves_every_page_and_every_action(
    roles_database: tuple[str, dict[str, str], Path],
) -> None:
    owner, logins, _schedules = roles_database
    pending, cancel, failed, done = (
        _job(owner, s) for s in ("pending", "pending", "failed", "done")
    )
    bulk = [_job(owner, "failed") for _ in range(2)]
    running, again, ended = (_job(owner, s) for s in ("running", "done", "cancelled"))
    _one(
        owner,
        "UPDATE jobs SET locked_until = now() + interval '5 min' WHERE id = %s RETURNING id",
        running,
    )
    with (
        dashboard(logins["ui_admin"]) as ui,
        httpx.Client(base_url=ui.origin, timeout=10) as client,
    ):
        for path in _pages(owner, failed):
            page = client.get(path)
            assert page.status_code == 200, (path, page.text[:500])
        confirm = client.get("/jobs/confirm?status=failed&action=retry")
        assert confirm.status_code == 200, confirm.text[:500]
        token = CSRF.search(client.get("/jobs").text)
        assert token is not None
        csrf = token.group(1)

        def post(path: str, **data: str) -> None:
            response = client.post(path, data={"csrf": csrf, **data})
            assert response.status_code == 303, (path, response.text[:500])

        post(f"/jobs/{pending}/run_now")
        post(f"/jobs/{cancel}/cancel")
        post(f"/jobs/{failed}/retry")
        post(f"/jobs/{done}/delete")
        post(f"/jobs/{running}/cancel")  # told to stop, as `pgbeat jobs cancel ID` does
        post(f"/jobs/{again}/retry")  # a done job runs again, as `pgbeat jobs retry ID`
        post(f"/jobs/{ended}/retry")
        post("/jobs/bulk", action="retry", ids=str(bulk[0]))
        for query in (
            "action=retry&status=failed&kind=invoice",
            "action=delete&status=done",
            "action=run_now&status=pending&kind=invoice",
            "action=cancel&status=pending&kind=invoice",
        ):  # every action on all matching jobs, through its confirm page
            confirm_page = client.get(f"/jobs/confirm?{query}")
            assert confirm_page.status_code == 200, (query, confirm_page.text[:300])
            fields = dict(HIDDEN.findall(confirm_page.text.split("/jobs/bulk", 1)[1]))
            response = client.post("/jobs/bulk", data=fields)
            assert response.status_code == 303, (query, response.text[:300])
        post("/schedules/nightly_report/pause")
        post("/schedules/nightly_report/resume")
        post("/schedules/heartbeat/run")
    status = "SELECT status FROM jobs WHERE id = %s"
    assert _one(owner, status, cancel) == "cancelled"
    assert _one(owner, status, failed) == "pending"
    assert _one(owner, status, bulk[0]) == "pending"
    assert _one(owner, status, done) is None
    stopping = "SELECT status, cancel_requested_at IS NOT NULL FROM jobs WHERE id = %s"
    assert _row(owner, stopping, running) == ("running", True)
    assert [_one(owner, status, job) for job in (again, ended)] == ["pending", "pending"]
    assert _one(owner, "SELECT run_at <= now() FROM jobs WHERE id = %s", pending) is True
    assert _one(owner, "SELECT paused FROM pgbeat_schedules WHERE name = 'nightly_report'") is False
    by_status = "SELECT count(*) FROM jobs WHERE kind = 'invoice' AND status = %s"
    assert _one(owner, by_status, "failed") == 0  # retried, then cancelled with the pending
    assert _one(owner, "SELECT count(*) FROM jobs WHERE status = 'done'") == 0
    assert _one(owner, by_status, "pending") == 0 and _one(owner, by_status, "cancelled") > 0
    assert _one(owner, "SELECT count(*) FROM jobs WHERE unique_key LIKE 'heartbeat@manual:%%'") == 1


def test_the_viewer_role_asked_to_act_answers_403_and_changes_nothing(
    roles_database: tuple[str, dict[str, str], Path],
) -> None:
    """Served without --read-only, the buttons show, but the database refuses: a 403 page
    that says why, not a 500."""
    owner, logins, _schedules = roles_database
    job = _job(owner, "failed")
    with (
        dashboard(logins["ui_viewer"]) as ui,
        httpx.Client(base_url=ui.origin, timeout=10) as client,
    ):
        token = CSRF.search(client.get("/jobs").text)
        assert token is not None
        for path in (f"/jobs/{job}/retry", "/schedules/nightly_report/pause"):
            response = client.post(path, data={"csrf": token.group(1)})
            assert response.status_code == 403, (path, response.text[:300])
            assert "pgbeat_ui_admin" in response.text
    assert _one(owner, "SELECT status FROM jobs WHERE id = %s", job) == "failed"


def test_the_admin_role_pauses_any_queue_and_backfills(
    roles_database: tuple[str, dict[str, str], Path],
) -> None:
    """What the Queues and schedule pages offer the admin works under its role: pause and
    resume (queues named with "/", "." or ".." too), and a schedule's backfill."""
    owner, logins, _schedules = roles_database
    names = ["default", "a/b", ".", ".."]
    with psycopg.connect(owner, autocommit=True) as conn:
        for name in names:
            conn.execute("INSERT INTO jobs (kind, payload, queue) VALUES ('q', '{}', %s)", (name,))
    with (
        dashboard(logins["ui_admin"]) as ui,
        httpx.Client(base_url=ui.origin, timeout=10) as client,
    ):
        page = client.get("/queues")
        assert page.status_code == 200, page.text[:500]
        token = CSRF.search(page.text)
        assert token is not None
        for name in names:
            for action in ("pause", "resume"):
                response = client.post(
                    f"/queues/{action}", data={"csrf": token.group(1), "queue": name}
                )
                assert response.status_code == 303, (name, action, response.text[:300])
        backfill = client.post(
            "/schedules/nightly_report/backfill",
            data={
                "csrf": token.group(1),
                "from": "2026-01-01T00:00:00Z",
                "to": "2026-01-03T00:00:00Z",
            },
        )
        assert backfill.status_code == 303, backfill.text[:500]
    paused = "SELECT count(*) FROM pgbeat_queues WHERE name = ANY(%s) AND NOT paused"
    assert _one(owner, paused, names) == len(names)  # paused, then resumed, each
    periods = "SELECT count(*) FROM jobs WHERE unique_key LIKE 'nightly_report@2026-01-0%%'"
    assert _one(owner, periods) == 2
