"""The registry that ``manage.py pgbeat_worker`` runs (``pgbeat.contrib.django.handlers:registry``).

Importing it sets Django up (``DJANGO_SETTINGS_MODULE``) and imports every installed app's
``jobs`` module, whose handlers register on ``pgbeat.contrib.django.registry``. When a
``TASKS`` backend is pgbeat's (tasks.py), the apps' ``tasks`` modules are imported too, and
every ``@task`` of that backend gets a handler (task_runs.py).
"""

from __future__ import annotations

import django
from django.conf import settings
from django.utils.module_loading import autodiscover_modules

from pgbeat.contrib.django import registry

BACKEND = "pgbeat.contrib.django.tasks.PgbeatBackend"

django.setup()
autodiscover_modules("jobs")
if any(
    isinstance(options, dict) and options.get("BACKEND") == BACKEND
    for options in (getattr(settings, "TASKS", None) or {}).values()
):
    from pgbeat.contrib.django.task_runs import register_tasks

    autodiscover_modules("tasks")
    register_tasks(registry)

__all__ = ["registry"]
