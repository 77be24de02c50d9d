"""When a scheduler replica must look back for missed periods: at start, and after a reconnect.

A reconnect may follow a failover: the new primary lacks the claims the old one acknowledged
but never shipped (asynchronous replication), and the periods of the outage are late. A
replica then starts over as at start (its copy of the table reloaded, every schedule with no
last tick), so each schedule's catch-up policy looks back over its window. Pure: it compares
the connector's count of connections opened.
"""

from __future__ import annotations


class LookBack:
    """Answers, tick by tick, whether this tick runs on a connection opened since the last."""

    def __init__(self) -> None:
        self._seen: int | None = None  # the connector's count at the previous tick

    def reconnected(self, opened: int) -> bool:
        """True when ``opened`` (connections opened so far) grew since a previous tick."""
        before, self._seen = self._seen, opened
        return before is not None and opened != before
