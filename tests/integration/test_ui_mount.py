"""The dashboard mounted inside an application: Starlette's ``Mount``, FastAPI's ``mount`` and
a Django ASGI project behind one router, over HTTP. A mounted app gets no lifespan of its
own, and every link, redirect and cookie must keep the mount's path.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

import pgbeat
from tests.integration.ui_support import ADMIN_TOKEN

MOUNT = "/ops/pgbeat"
ORIGIN = "http://127.0.0.1"  # the dashboard answers loopback hosts unless told others


def host_home(_request: Request) -> PlainTextResponse:
    return PlainTextResponse("the host app")


@contextlib.contextmanager
def dashboard_closed_after(database_url: str) -> Iterator[Starlette]:
    """A dashboard whose pool is closed when the test ends. Mounted, it gets no lifespan of
    its own: in an application its pool lives as long as the process, but a test must not
    leave it to the garbage collector, which may run in one of the pool's own threads,
    where psycopg_pool cannot join that thread (a clean-clone CI run failed on it once)."""
    dashboard = pgbeat.ui.create_app(database_url, token=ADMIN_TOKEN)
    try:
        yield dashboard
    finally:
        with TestClient(dashboard):  # its lifespan: open (nothing if a page did), then close
            pass


def starlette_host(dashboard: Starlette) -> Starlette:
    """An application of the user's own, with the dashboard as the README shows it."""
    return Starlette(routes=[Route("/", host_home), Mount(MOUNT, app=dashboard)])


@pytest.fixture
def host(database_url: str) -> Iterator[Starlette]:
    with dashboard_closed_after(database_url) as dashboard:
        yield starlette_host(dashboard)


@pytest.fixture
def client(host: Starlette) -> Iterator[TestClient]:
    with TestClient(host, base_url=ORIGIN, follow_redirects=False) as running:
        yield running


def form_token(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]*)"', html)
    assert found is not None, "the page has no form"
    return found.group(1)


def log_in(client: TestClient, prefix: str = MOUNT) -> None:
    home = client.get(prefix + "/")
    assert home.status_code == 303
    assert home.headers["location"] == f"{prefix}/login?next={prefix}/"
    form = client.get(home.headers["location"])
    assert form.status_code == 200
    assert f'action="{prefix}/login"' in form.text
    assert f'href="{prefix}/static/pgbeat.css' in form.text
    done = client.post(
        prefix + "/login",
        data={"token": ADMIN_TOKEN, "next": f"{prefix}/jobs", "csrf": form_token(form.text)},
    )
    assert done.status_code == 303
    assert done.headers["location"] == f"{prefix}/jobs"
    assert f"Path={prefix}" in done.headers["set-cookie"]


def test_every_page_works_under_a_starlette_mount(
    client: TestClient, conn: psycopg.Connection[Any]
) -> None:
    failed = conn.execute(
        "INSERT INTO jobs (kind, payload, status, attempts, last_error, finished_at)"
        " VALUES ('export', '{}', 'failed', 1, 'IOError: disk', now()) RETURNING id"
    ).fetchone()
    assert failed is not None
    assert client.get("/").text == "the host app"
    assert client.get(MOUNT + "/healthz").status_code == 200
    log_in(client)
    for path in ("/", "/jobs", "/failures", "/schedules", "/processes", "/static/pgbeat.css"):
        page = client.get(MOUNT + path)
        assert page.status_code == 200, (path, page.text[:300])
    detail = client.get(f"{MOUNT}/jobs/{failed[0]}")
    assert f'action="{MOUNT}/jobs/{failed[0]}/retry"' in detail.text
    retried = client.post(
        f"{MOUNT}/jobs/{failed[0]}/retry",
        data={"csrf": form_token(detail.text)},
        headers={"origin": ORIGIN},
    )
    assert retried.status_code == 303
    assert retried.headers["location"].startswith(MOUNT + "/")
    status = conn.execute("SELECT status FROM jobs WHERE id = %s", failed).fetchone()
    assert status == ("pending",)


def test_the_pool_opens_on_the_first_page_without_any_lifespan(host: Starlette) -> None:
    # No `with`: the TestClient then sends no lifespan events at all, like a server that
    # does not support them.
    client = TestClient(host, base_url=ORIGIN, follow_redirects=False)
    assert client.get(MOUNT + "/healthz").text == "ok\n"


def test_fastapi_mount(database_url: str) -> None:
    fastapi = pytest.importorskip("fastapi")
    app = fastapi.FastAPI()
    with dashboard_closed_after(database_url) as dashboard:
        app.mount("/pgbeat", dashboard)
        with TestClient(app, base_url=ORIGIN, follow_redirects=False) as client:
            log_in(client, "/pgbeat")
            assert client.get("/pgbeat/jobs").status_code == 200


def test_django_asgi_project_behind_one_router(database_url: str, django_database: str) -> None:
    from django.core.asgi import get_asgi_application

    with dashboard_closed_after(database_url) as dashboard:
        app = Starlette(
            routes=[Mount("/pgbeat", app=dashboard), Mount("/", app=get_asgi_application())]
        )
        with TestClient(app, base_url=ORIGIN, follow_redirects=False) as client:
            log_in(client, "/pgbeat")
            assert client.get("/pgbeat/schedules").status_code == 200
            assert client.get("/no-such-django-page/").status_code == 404  # Django answers
