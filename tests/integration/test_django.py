"""pgbeat in a real Django project (tests/django_project, psycopg 3 backend).

``manage.py migrate`` applies pgbeat's schema, ``pgbeat.enqueue(connection, ...)`` joins
``transaction.atomic()`` (savepoints included), and ``manage.py pgbeat_worker`` runs the
handlers of the installed apps' ``jobs.py``.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.migrate import available_migrations
from tests.integration.django_support import manage_py, project_env, run_worker

pytest.importorskip("django")


def committed(conn: psycopg.Connection[Any]) -> tuple[list[str], int]:
    """(job kinds, orders) as another connection sees them."""
    kinds = [row[0] for row in conn.execute("SELECT kind FROM jobs ORDER BY id")]
    orders = conn.execute("SELECT count(*) FROM shop_order").fetchone()
    assert orders is not None
    return kinds, orders[0]


def test_migrate_applies_pgbeat_schema(django_db: psycopg.Connection[Any]) -> None:
    applied = [r[0] for r in django_db.execute("SELECT version FROM pgbeat_migrations ORDER BY 1")]
    assert applied == [m.version for m in available_migrations()]


def test_atomic_commit_keeps_both_and_rollback_neither(django_db: psycopg.Connection[Any]) -> None:
    from django.db import connection, transaction
    from shop.models import Order

    with transaction.atomic():
        order = Order.objects.create(email="a@example.com")
        job_id = pgbeat.enqueue(connection, "order_confirmation", {"order_id": order.id})
        assert committed(django_db) == ([], 0)  # not visible before the commit
    assert isinstance(job_id, int)
    assert committed(django_db) == (["order_confirmation"], 1)
    with pytest.raises(RuntimeError), transaction.atomic():
        Order.objects.create(email="b@example.com")
        pgbeat.enqueue(connection, "order_confirmation", {"order_id": 0})
        raise RuntimeError("the view failed after the enqueue")
    assert committed(django_db) == (["order_confirmation"], 1)


def test_nested_atomic_rolled_back_removes_its_job(django_db: psycopg.Connection[Any]) -> None:
    from django.db import connection, transaction

    with transaction.atomic():
        pgbeat.enqueue(connection, "outer")
        with pytest.raises(RuntimeError), transaction.atomic():  # a savepoint
            pgbeat.enqueue_many(connection, [pgbeat.NewJob("inner"), pgbeat.NewJob("inner")])
            raise RuntimeError("rolls back to the savepoint")
        pgbeat.enqueue(connection, "after")
    assert committed(django_db) == (["outer", "after"], 0)


def test_outside_atomic_the_job_commits_at_once(django_db: psycopg.Connection[Any]) -> None:
    """Django runs in autocommit outside atomic(): the job commits like Django's own queries."""
    from django.db import connection

    pgbeat.enqueue(connection, "autocommitted")
    assert committed(django_db) == (["autocommitted"], 0)


@pytest.mark.slow
def test_manage_py_pgbeat_worker_runs_the_apps_handlers(
    django_db: psycopg.Connection[Any], django_database: str
) -> None:
    from django.db import connection, transaction
    from shop.models import Order

    with transaction.atomic():
        order = Order.objects.create(email="a@example.com")
        pgbeat.enqueue(connection, "order_confirmation", {"order_id": order.id})
    output = run_worker(
        manage_py("pgbeat_worker", "--poll", "200ms"),
        project_env(),
        lambda: Order.objects.get(id=order.id).confirmed,
        timeout=30,
    )
    status = django_db.execute("SELECT status FROM jobs").fetchone()
    assert status == ("done",), output
