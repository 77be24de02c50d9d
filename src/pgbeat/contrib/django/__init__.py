"""pgbeat in a Django project: add ``"pgbeat.contrib.django"`` to ``INSTALLED_APPS``.

Then ``manage.py migrate`` applies pgbeat's schema too, handlers registered on ``registry``
in any installed app's ``jobs.py`` run under ``manage.py pgbeat_worker``, and
``pgbeat.enqueue(django.db.connection, ...)`` joins the ``transaction.atomic()`` block it is in.
Importing this package does not import Django: apps import ``registry`` from it at any time.
"""

from pgbeat.registry import Registry

registry = Registry()

__all__ = ["registry"]
