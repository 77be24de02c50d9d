"""The registry that ``manage.py pgbeat_worker`` runs (``pgbeat.contrib.django.handlers:registry``).

Importing it sets Django up (``DJANGO_SETTINGS_MODULE``) and imports every installed app's
``jobs`` module, whose handlers register on ``pgbeat.contrib.django.registry``.
"""

from __future__ import annotations

import django
from django.utils.module_loading import autodiscover_modules

from pgbeat.contrib.django import registry

django.setup()
autodiscover_modules("jobs")

__all__ = ["registry"]
