"""When a scheduler replica looks back for missed periods, and what history that needs kept.

At start, and after a reconnect: a reconnect may follow a failover, and the new primary lack
the claims the old one acknowledged but never shipped (asynchronous replication). A replica
then starts over as at start (its copy of the table reloaded, every schedule with no last
tick), so each schedule's catch-up policy looks back over its window; the history purge
must keep that window's decisions. Pure.
"""

from __future__ import annotations

from datetime import timedelta

from pgbeat.scheduling.catchup import ON_TIME


class LookBack:
    """Answers, tick by tick, whether this tick runs on a connection opened since the last."""

    def __init__(self) -> None:
        self._seen: int | None = None  # the connector's count at the previous tick

    def reconnected(self, opened: int) -> bool:
        """True when ``opened`` (connections opened so far) grew since a previous tick."""
        before, self._seen = self._seen, opened
        return before is not None and opened != before


def retention_for(asked: timedelta, longest_window: timedelta | None) -> timedelta:
    """The history retention to purge with: ``asked``, but never shorter than the look-back
    of the schedule with the longest catch-up window (keep_for's margin included)."""
    if longest_window is None:
        return asked
    return max(asked, longest_window + ON_TIME + timedelta(minutes=1))
