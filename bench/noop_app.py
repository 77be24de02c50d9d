"""A registry with one no-op handler, for drains run as `pgbeat worker` processes."""

from __future__ import annotations

from typing import Any

import pgbeat

registry = pgbeat.Registry()


@registry.handler("noop")
def noop(payload: Any) -> None:
    return None
