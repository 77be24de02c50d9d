"""Django's task framework, wherever it comes from: ``django.tasks`` (Django 6) or the
``django_tasks`` backport (Django 4.2 to 5.2, ``pip install django-tasks``).

Both have the same classes under the same names but two exceptions; this module imports
the one installed, once, so the backend and the worker's handlers use the classes of the
framework the project's ``@task`` functions were made with.
"""

from __future__ import annotations

from typing import Any

try:  # Django 6
    from django.tasks import TaskContext, TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started

    SOURCE = "django.tasks"
except ImportError:  # the backport
    try:
        import django_tasks  # noqa: F401
    except ImportError:
        raise ImportError(
            "pgbeat's tasks backend needs Django's task framework: Django 6, or "
            "`pip install django-tasks` (the backport) before"
        ) from None
    from django_tasks import TaskContext, TaskResult, TaskResultStatus
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

    SOURCE = "django_tasks"

__all__ = [
    "SOURCE",
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "module_path",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def module_path(value: Any) -> str:
    """``module.qualname`` of a function or class: a task's name, an exception's path."""
    return f"{value.__module__}.{value.__qualname__}"
