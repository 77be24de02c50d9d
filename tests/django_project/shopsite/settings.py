"""Settings of the test project: its database comes from ``PGBEAT_DJANGO_DATABASE_URL``."""

from __future__ import annotations

import importlib.util
import os

from psycopg.conninfo import conninfo_to_dict

_params = conninfo_to_dict(os.environ.get("PGBEAT_DJANGO_DATABASE_URL", "dbname=pgbeat_django"))

SECRET_KEY = "only-for-tests"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["testserver"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "shopsite.urls"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "pgbeat.contrib.django",
    "shop",  # beside manage.py, as in a project made by `django-admin startproject`
]
# Django's task framework: built in from Django 6, the django_tasks backport before.
if importlib.util.find_spec("django.tasks") is None:
    INSTALLED_APPS.append("django_tasks")
TASKS = {
    "default": {
        "BACKEND": "pgbeat.contrib.django.tasks.PgbeatBackend",
        # one run each: the tests read a failure at once, without waiting for retries
        "OPTIONS": {"MAX_ATTEMPTS": 1, "TAGS": ["django"]},
    }
}
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _params.get("dbname", ""),
        "USER": _params.get("user", ""),
        "PASSWORD": _params.get("password", ""),
        "HOST": _params.get("host", ""),
        "PORT": _params.get("port", ""),
    }
}
