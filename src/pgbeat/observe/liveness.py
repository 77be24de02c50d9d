"""When a process counts as alive and a period as overdue: one definition for every face.

Pure constants and rules: the CLI (`pgbeat status`, `pgbeat health`), the dashboard and the
heartbeats all read them here, so the faces cannot disagree about what they show.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pgbeat.scheduling.catchup import ON_TIME

BEAT_EVERY = timedelta(seconds=5)
# Six missed beats: the process is gone. Its row is pruned then, and no face counts it as live.
STALE_AFTER = timedelta(seconds=30)
# A period this late without a job is overdue ("missing"): ON_TIME, and 5 s more for the
# job of a period that a loaded replica is still inserting.
OVERDUE_GRACE = ON_TIME + timedelta(seconds=5)


def is_live(heartbeat_age: timedelta) -> bool:
    """Whether a process whose last beat is ``heartbeat_age`` old counts as running."""
    return heartbeat_age <= STALE_AFTER


def is_overdue(fire_at: datetime, now: datetime) -> bool:
    """Whether a period due at ``fire_at`` should have its job by ``now``."""
    return now - fire_at >= OVERDUE_GRACE
