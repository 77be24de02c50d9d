"""``manage.py pgbeat_worker [pgbeat worker's flags]``: run the installed apps' handlers,
and the ``@task`` functions of Django's task framework when ``TASKS`` uses pgbeat's backend.

The command becomes ``pgbeat worker pgbeat.contrib.django.handlers:registry`` (the same
process, through exec), connected to Django's ``default`` database unless
``--database-url`` says otherwise; ``--processes N`` starts N such processes.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand
from django.db import connections

APP = "pgbeat.contrib.django.handlers:registry"
DJANGO_OPTIONS = ("--settings", "--pythonpath")  # handled by manage.py before any command
# Django's connection parameters that are not libpq's (psycopg objects and settings).
NOT_LIBPQ = ("context", "cursor_factory", "prepare_threshold")


class Command(BaseCommand):  # type: ignore[misc]  # Django ships no type hints
    help = (
        "Run a pgbeat worker for the handlers in the installed apps' jobs.py modules "
        "and the tasks of pgbeat's TASKS backend."
    )

    def run_from_argv(self, argv: list[str]) -> None:
        """Pass every argument to ``pgbeat worker`` (see ``pgbeat worker --help``)."""
        self.handle(*pgbeat_arguments(argv[2:]))

    def handle(self, *args: str, **options: Any) -> None:
        env = {**os.environ}
        if not any(arg.partition("=")[0] == "--database-url" for arg in args):
            env["DATABASE_URL"] = database_url()
        # the worker imports the project's modules as manage.py does: from its directory
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [sys.path[0], env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "pgbeat", "worker", APP, *args]
        sys.stdout.flush()
        os.execve(sys.executable, command, env)


def pgbeat_arguments(arguments: list[str]) -> list[str]:
    """``arguments`` without Django's own ``--settings``/``--pythonpath`` (and their values)."""
    kept: list[str] = []
    skip = False
    for argument in arguments:
        name, equals, _ = argument.partition("=")
        if skip:
            skip = False
        elif name in DJANGO_OPTIONS:
            skip = not equals
        else:
            kept.append(argument)
    return kept


def database_url(alias: str = "default") -> str:
    """A libpq connection string for Django's database ``alias``."""
    from psycopg.conninfo import make_conninfo

    params = connections[alias].get_connection_params()
    return make_conninfo(
        "", **{k: v for k, v in params.items() if k not in NOT_LIBPQ and v is not None}
    )
