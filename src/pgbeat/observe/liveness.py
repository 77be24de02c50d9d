"""When a process counts as alive: one definition for every face.

Pure constants and rules: the CLI (`pgbeat status`, `pgbeat health`), the dashboard and the
heartbeats all read them here, so the faces cannot disagree about what they show. When a
period is overdue is the schedules' rule: ``pgbeat.scheduling.health``.
"""

from __future__ import annotations

from datetime import timedelta

BEAT_EVERY = timedelta(seconds=5)
# Six missed beats: the process is gone. Its row is pruned then, and no face counts it as live.
STALE_AFTER = timedelta(seconds=30)


def is_live(heartbeat_age: timedelta) -> bool:
    """Whether a process whose last beat is ``heartbeat_age`` old counts as running."""
    return heartbeat_age <= STALE_AFTER
