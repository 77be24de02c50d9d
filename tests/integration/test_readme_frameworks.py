"""The README's "Using pgbeat with FastAPI / Flask / Django" snippets, run as written.

Each ``<!-- snippet: NAME -->`` block is executed with its placeholder URL pointed at the
test's database, then driven through the framework's own test client. The second request
of each test fails at COMMIT, after its enqueue (a deferred unique constraint): the job
must vanish with the business row.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.helpers import statuses

README = Path(__file__).resolve().parents[2] / "README.md"
PLACEHOLDER = "postgresql+psycopg://app@db/app"
USERS = (
    "CREATE TABLE users (id bigserial PRIMARY KEY, email text UNIQUE DEFERRABLE INITIALLY DEFERRED)"
)


def snippet(name: str) -> str:
    """The python block that follows ``<!-- snippet: name -->`` in the README."""
    pattern = rf"<!-- snippet: {name} -->\n```python\n(.*?)\n```"
    found = re.search(pattern, README.read_text(encoding="utf-8"), re.DOTALL)
    assert found, f"no snippet {name!r} in the README"
    return found.group(1)


def run_snippet(name: str, database_url: str) -> dict[str, Any]:
    code = snippet(name)
    assert PLACEHOLDER in code or name == "django"
    url = database_url.replace("postgresql://", "postgresql+psycopg://", 1)
    namespace: dict[str, Any] = {"__name__": f"readme_{name}"}
    exec(compile(code.replace(PLACEHOLDER, url), f"README.md:{name}", "exec"), namespace)
    return namespace


def jobs(conn: psycopg.Connection[Any]) -> list[tuple[str, Any]]:
    return [(kind, payload) for kind, payload in conn.execute("SELECT kind, payload FROM jobs")]


def test_fastapi_snippet(database_url: str, conn: psycopg.Connection[Any]) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    conn.execute(USERS)
    app = run_snippet("fastapi", database_url)
    with TestClient(app["app"], raise_server_exceptions=False) as client:
        first = client.post("/users", params={"email": "a@example.com"})
        again = client.post("/users", params={"email": "a@example.com"})  # fails at COMMIT
        assert client.portal is not None  # set while the client is open
        client.portal.call(app["engine"].dispose)
    assert first.status_code == 200, first.text
    assert again.status_code == 500
    assert jobs(conn) == [("welcome_email", {"user_id": first.json()["id"]})]


def test_flask_snippet(database_url: str, conn: psycopg.Connection[Any]) -> None:
    pytest.importorskip("flask")
    conn.execute(USERS)
    app = run_snippet("flask", database_url)
    try:
        client = app["app"].test_client()
        first = client.post("/users", data={"email": "a@example.com"})
        again = client.post("/users", data={"email": "a@example.com"})  # fails at COMMIT
    finally:
        app["engine"].dispose()
    assert first.status_code == 200, first.text
    assert again.status_code == 500
    assert jobs(conn) == [("welcome_email", {"user_id": first.json["id"]})]


def test_django_snippet(django_db: psycopg.Connection[Any]) -> None:
    from django.db import IntegrityError
    from django.test import RequestFactory

    view = run_snippet("django", "")["place_order"]
    django_db.execute(
        "ALTER TABLE shop_order ADD CONSTRAINT email_once UNIQUE (email)"
        " DEFERRABLE INITIALLY DEFERRED"
    )
    try:
        first = view(RequestFactory().post("/orders", {"email": "a@example.com"}))
        with pytest.raises(IntegrityError):  # fails at COMMIT, after the enqueue
            view(RequestFactory().post("/orders", {"email": "a@example.com"}))
    finally:
        django_db.execute("ALTER TABLE shop_order DROP CONSTRAINT email_once")
    assert first.status_code == 200
    order_id = int(first.content.decode().split(":")[1].strip(" }"))
    assert jobs(django_db) == [("order_confirmation", {"order_id": order_id})]
    assert statuses(django_db) == {"pending": 1}
