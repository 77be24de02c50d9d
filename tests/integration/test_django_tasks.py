"""pgbeat as a backend of Django's task framework (the django_tasks backport on Python 3.11,
``django.tasks`` on Django 6), in the real project of tests/django_project: ``.enqueue()``
in Django's transaction, ``manage.py pgbeat_worker`` and ``pgbeat worker`` running the
tasks, results and errors read back as the framework defines them, and ``manage.py test``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.integration.conftest import DJANGO_PROJECT
from tests.integration.django_support import manage_py, project_env, run_worker

pytest.importorskip("django")


def job_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT kind, payload, queue, priority, max_attempts, tags FROM jobs ORDER BY id"
    ).fetchall()


def test_feature_flags_tell_the_truth(django_database: str) -> None:
    from shop.tasks import add

    from pgbeat.contrib.django.framework import SOURCE
    from pgbeat.contrib.django.tasks import PgbeatBackend

    backend = add.get_backend()
    assert isinstance(backend, PgbeatBackend)
    assert SOURCE in ("django.tasks", "django_tasks")
    # each flag's feature is exercised below: run_after (defer), add_later (async),
    # get_result from another process's run, priority on the row
    flags = ("supports_defer", "supports_async_task", "supports_get_result", "supports_priority")
    assert all(getattr(backend, flag) for flag in flags)


def test_enqueue_joins_djangos_transaction(django_db: psycopg.Connection[Any]) -> None:
    from django.db import transaction
    from shop.tasks import add

    with transaction.atomic():
        kept = add.enqueue(2, b=3)
    with transaction.atomic():
        add.enqueue(9, 9)
        transaction.set_rollback(True)
    assert kept.status == "READY" and kept.id.isdigit()
    assert job_rows(django_db) == [
        ("shop.tasks.add", {"args": [2], "kwargs": {"b": 3}}, "mail", 10, 1, ["django"])
    ]


def test_priority_queue_and_run_after_map_to_the_job(django_db: psycopg.Connection[Any]) -> None:
    from shop.tasks import add

    later = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    result = add.using(priority=-7, queue_name="slow", run_after=later).enqueue(1, 1)
    row = django_db.execute(
        "SELECT queue, priority, run_at FROM jobs WHERE id = %s", (int(result.id),)
    ).fetchone()
    assert row == ("slow", -7, later)
    read = add.get_result(result.id)
    assert (read.task.queue_name, read.task.priority, read.status) == ("slow", -7, "READY")


def test_what_pgbeat_refuses_is_an_invalid_task(django_db: psycopg.Connection[Any]) -> None:
    from shop.tasks import add

    from pgbeat.contrib.django.framework import InvalidTaskError

    with pytest.raises(InvalidTaskError, match="queue_name"):
        add.using(queue_name=" padded ")
    with pytest.raises(InvalidTaskError, match="JSON"):
        add.enqueue(object(), 1)
    assert job_rows(django_db) == []


def test_unknown_ids_do_not_exist(django_db: psycopg.Connection[Any]) -> None:
    from django.db import connection
    from shop.tasks import add

    import pgbeat
    from pgbeat.contrib.django.framework import TaskResultDoesNotExist

    plain = pgbeat.enqueue(connection, "order_confirmation", {"order_id": 1})
    for result_id in ("999999", "abc", "", str(plain)):
        with pytest.raises(TaskResultDoesNotExist):
            add.get_result(result_id)


def test_aenqueue_and_aget_result(django_db: psycopg.Connection[Any]) -> None:
    from shop.tasks import add

    async def both() -> tuple[str, str]:
        result = await add.aenqueue(4, 5)
        read = await add.aget_result(result.id)
        return result.id, read.status

    job_id, status = asyncio.run(both())
    assert status == "READY"
    assert django_db.execute("SELECT count(*) FROM jobs WHERE id = %s", (int(job_id),)).fetchone()


def _all_finished(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT count(*) FROM jobs WHERE status IN ('pending', 'running')")
    return row.fetchone() == (0,)


@pytest.mark.slow
def test_manage_py_pgbeat_worker_runs_tasks_and_results_report_them(
    django_db: psycopg.Connection[Any],
) -> None:
    from shop.models import Order
    from shop.tasks import add, add_later, confirm_order, describe, fail, out_of_stock

    order = Order.objects.create(email="a@example.com")
    results = {
        "confirm": confirm_order.enqueue(order.id),
        "add": add.enqueue(2, 3),
        "fail": fail.enqueue("boom"),
        "out_of_stock": out_of_stock.enqueue(),
        "describe": describe.enqueue("hi"),
        "add_later": add_later.enqueue(1, 2),
    }
    command = manage_py("pgbeat_worker", "--poll", "200ms")
    run_worker(command, project_env(), lambda: _all_finished(django_db))
    for result in results.values():
        result.refresh()
    assert {name: r.status for name, r in results.items()} == {
        "confirm": "SUCCESSFUL",
        "add": "SUCCESSFUL",
        "fail": "FAILED",
        "out_of_stock": "FAILED",
        "describe": "SUCCESSFUL",
        "add_later": "SUCCESSFUL",
    }
    assert results["confirm"].return_value == {"confirmed": order.id}
    assert Order.objects.get(id=order.id).confirmed
    assert results["add"].return_value == 5
    assert results["add_later"].return_value == 3
    assert results["describe"].return_value == {
        "word": "hi",
        "id": results["describe"].id,
        "attempt": 1,
    }
    assert results["add"].attempts == 1 and results["add"].finished_at is not None
    failed = results["fail"]
    assert [e.exception_class_path for e in failed.errors] == ["builtins.ValueError"]
    assert failed.errors[0].exception_class is ValueError
    assert "boom" in failed.errors[0].traceback
    with pytest.raises(ValueError, match="failed"):
        failed.return_value  # noqa: B018  (the framework raises for a failed task)
    assert results["out_of_stock"].errors[0].exception_class_path == "shop.tasks.OutOfStock"


@pytest.mark.slow
def test_pgbeat_worker_runs_them_with_the_tasks_registry(
    django_db: psycopg.Connection[Any], django_database: str
) -> None:
    from shop.tasks import add

    result = add.enqueue(20, 22)
    env = project_env() | {
        "DJANGO_SETTINGS_MODULE": "shopsite.settings",
        "PYTHONPATH": str(DJANGO_PROJECT),
        "DATABASE_URL": django_database,
    }
    command = [sys.executable, "-m", "pgbeat", "worker", "pgbeat.contrib.django.handlers:registry"]
    run_worker([*command, "--poll", "200ms"], env, lambda: _all_finished(django_db))
    result.refresh()
    assert (result.status, result.return_value) == ("SUCCESSFUL", 42)


@pytest.mark.slow
def test_manage_py_test_runs_the_projects_task_tests(django_database: str) -> None:
    tested = subprocess.run(
        [sys.executable, "manage.py", "test", "shop", "--noinput"],
        cwd=str(DJANGO_PROJECT),
        env=project_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert tested.returncode == 0, tested.stderr
    assert "OK" in tested.stderr


def test_a_later_run_after_is_not_run_early(django_db: psycopg.Connection[Any]) -> None:
    from django.db import connection
    from shop.tasks import add

    from pgbeat.contrib.django.handlers import registry
    from pgbeat.testing import drain

    soon = add.using(run_after=datetime.now(UTC) + timedelta(hours=1)).enqueue(1, 2)
    now = add.enqueue(3, 4)
    assert drain(connection, registry) == {"done": 1}
    assert add.get_result(now.id).return_value == 7
    assert add.get_result(soon.id).status == "READY"


def test_bad_options_are_refused_when_the_backend_is_made(django_database: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from pgbeat.contrib.django.tasks import PgbeatBackend

    backend = "pgbeat.contrib.django.tasks.PgbeatBackend"
    with pytest.raises(ImproperlyConfigured, match="MAX_ATTEMPTS"):
        PgbeatBackend("bad", {"BACKEND": backend, "OPTIONS": {"MAX_ATTEMPTS": 0}})
    with pytest.raises(ValueError, match="TAGS"):
        PgbeatBackend("bad", {"BACKEND": backend, "OPTIONS": {"TAGS": [""]}})
    limited = PgbeatBackend("q", {"BACKEND": backend, "QUEUES": ["mail"]})
    assert limited.queues == {"mail"}
