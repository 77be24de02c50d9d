"""Fixtures shared by integration tests: a scheduler ticked by hand, the Django project's,
and the dashboard's.

The Django project in tests/django_project:

Django is set up once per process (its settings are read once), so the project's database
is the session's: created and migrated by ``manage.py migrate`` on first use, emptied
before each test by ``django_db``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import temporary_database
from tests.integration.ui_support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    fresh_database,
    seed_jobs,
    sync_schedules,
    write_schedules,
)
from tests.pgbouncer import Pgbouncer, unavailable_reason

DJANGO_PROJECT = Path(__file__).resolve().parents[1] / "django_project"


@pytest.fixture
def scheduler(database_url: str) -> Scheduler:
    """A scheduler of the test database's schedules (no file, no heartbeats) for the test to
    tick by hand: ``scheduler.tick(conn, now)``."""
    return Scheduler(database_url, None, heartbeat=False)


@pytest.fixture(scope="session")
def django_database(server_url: str) -> Iterator[str]:
    """The Django project's database, migrated by ``manage.py migrate`` (in this process)."""
    django = pytest.importorskip("django")
    with temporary_database(server_url, prefix="pgbeat_django") as url:
        yield from _django_project(django, url)


def _django_project(django: Any, url: str) -> Iterator[str]:
    os.environ["PGBEAT_DJANGO_DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "shopsite.settings"
    sys.path.insert(0, str(DJANGO_PROJECT))  # the project's apps sit beside its manage.py
    django.setup()
    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0)
    yield url
    connections.close_all()


@pytest.fixture
def django_db(django_database: str) -> Iterator[psycopg.Connection[Any]]:
    """An outside view of the project's database, emptied before each test."""
    with psycopg.connect(django_database, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs, shop_order")
        yield conn


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium under Playwright, for the dashboard's browser tests."""
    if shutil.which(CHROMIUM) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing (apt-get install chromium)")
        pytest.skip(f"{CHROMIUM} is missing")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def bouncer(server_url: str) -> Iterator[Pgbouncer]:
    """A pgbouncer in transaction mode in front of the test server, for one module (skips
    where pgbouncer is not installed)."""
    reason = unavailable_reason(server_url)
    if reason:
        pytest.skip(reason)
    bouncer = Pgbouncer(server_url, pool_size=10)
    yield bouncer
    bouncer.close()


@pytest.fixture(scope="module")
def ui_database(server_url: str, template_name: str) -> Iterator[str]:
    """A database of seeded jobs for one dashboard test module."""
    with fresh_database(server_url, template_name) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            seed_jobs(conn)
        yield url


@pytest.fixture(scope="module")
def schedules_file(tmp_path_factory: pytest.TempPathFactory, ui_database: str) -> Path:
    """The dashboard tests' schedules file, synced into ``ui_database``."""
    path = write_schedules(tmp_path_factory.mktemp("ui"))
    sync_schedules(ui_database, path)
    return path
