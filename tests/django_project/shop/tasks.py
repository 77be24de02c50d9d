"""The shop's tasks (Django's task framework), run by pgbeat's workers."""

from __future__ import annotations

from typing import Any

from shop.models import Order

try:  # Django 6
    from django.tasks import TaskContext, task
except ImportError:  # the django_tasks backport
    from django_tasks import TaskContext, task


class OutOfStock(Exception):
    """A failure of the shop's own."""


@task()
def confirm_order(order_id: int) -> dict[str, int]:
    Order.objects.filter(id=order_id).update(confirmed=True)
    return {"confirmed": order_id}


@task(priority=10, queue_name="mail")
def add(a: int, b: int) -> int:
    return a + b


@task()
def fail(message: str) -> None:
    raise ValueError(message)


@task()
def out_of_stock() -> None:
    raise OutOfStock("none left")


@task(takes_context=True)
def describe(context: TaskContext, word: str) -> dict[str, Any]:
    return {"word": word, "id": context.task_result.id, "attempt": context.attempt}


@task()
async def add_later(a: int, b: int) -> int:
    return a + b
