"""The web dashboard (``pgbeat ui``): schedules, jobs, failures and processes at a glance.

Needs the ``ui`` extra (``pip install 'pgbeat[ui]'``); ``import pgbeat`` never imports it.
``create_app`` and ``UiSettings`` are loaded on first use (PEP 562), so importing one of
the dashboard's modules does not import the whole web application first, and the
package's modules can import each other without a cycle through this file.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["UiSettings", "create_app"]

_HOMES = {"create_app": "pgbeat.ui.app", "UiSettings": "pgbeat.ui.settings"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'pgbeat.ui' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
