"""The web dashboard (``pgbeat ui``): schedules, jobs, failures and processes at a glance.

Needs the ``ui`` extra (``pip install 'pgbeat[ui]'``); ``import pgbeat`` never imports it.
"""

from pgbeat.ui.app import create_app
from pgbeat.ui.settings import UiSettings

__all__ = ["UiSettings", "create_app"]
