"""When a schedule's ``Timing`` fires, with pgbeat's daylight-saving policy.

Pure: every instant is passed in and every answer is an aware UTC datetime, so the
scheduler and the ``schedules next`` preview agree on every replica. Cron expressions
are read and matched on naive local wall-clock time as Debian's cron does (cron.py) and
mapped to instants by Debian/Vixie cron's DST rules (see docs/cron.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from pgbeat.scheduling import cron, dst
from pgbeat.scheduling.schedule import Schedule, require_aware
from pgbeat.scheduling.timing import Timed

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_MICROSECOND = timedelta(microseconds=1)
_DAY = timedelta(days=1)


def fire_times_between(schedule: Timed, start: datetime, end: datetime) -> list[datetime]:
    """All fire instants t with start < t <= end, sorted, deduplicated, as aware UTC datetimes."""
    require_aware(start=start, end=end)
    if schedule.every is not None:
        return _every_between(schedule.every, start, end)
    fires: set[datetime] = set()
    for instants in _cron_fires(schedule, start):
        # Later wall-clock matches never fire before this one's first instant.
        if instants[0] > end:
            break
        fires.update(t for t in instants if start < t <= end)
    return sorted(fires)


# Where to start scanning wall-clock times, by (UTC instant, zone): a tick asks the same
# ``after`` of every cron schedule, in a few zones (planning.py keeps one per tick).
ScanStarts = dict[tuple[datetime, ZoneInfo], datetime]


def next_fire_after(
    schedule: Timed, after: datetime, scan_starts: ScanStarts | None = None
) -> datetime:
    """The first fire instant strictly after ``after``, as an aware UTC datetime."""
    require_aware(after=after)
    if schedule.every is not None:
        return _EPOCH + ((after - _EPOCH) // schedule.every + 1) * schedule.every
    candidates: list[datetime] = []
    for instants in _cron_fires(schedule, after, scan_starts):
        if len(instants) == 1 and not candidates:  # the common case, without a list
            if instants[0] > after:
                return instants[0]
            continue
        candidates.extend(t for t in instants if t > after)
        # A repeated (fall-back) hour can put an earlier fire after a later match, but
        # nothing after this wall-clock time fires before its first instant.
        if instants[0] > after:
            return min(candidates)
    raise AssertionError("unreachable: cron matches never run out")


def fire_times_after(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` periods strictly after ``after``, ascending, in UTC.

    Only periods within the schedule's ``start_at`` .. ``end_at``: fewer than ``count``
    (none, for a schedule past its end) when the window closes first.
    """
    if count < 0:
        raise ValueError(f"count must not be negative, got {count}")
    if schedule.start_at is not None and after < schedule.start_at:
        after = schedule.start_at - _MICROSECOND  # the start itself may be a period
    fires: list[datetime] = []
    for _ in range(count):
        after = next_fire_after(schedule, after)
        if schedule.end_at is not None and after > schedule.end_at:
            break
        fires.append(after)
    return fires


def periods_between(
    schedule: Schedule, start: datetime, end: datetime, limit: int
) -> list[datetime]:
    """The periods t with start <= t < end within the schedule's window, at most ``limit``.

    Read with the schedule's zone and DST rules, as the scheduler would have fired them
    (a backfill's periods). Stops after ``limit`` + 1, so a caller can tell "too many".
    """
    require_aware(start=start, end=end)
    if schedule.start_at is not None:
        start = max(start, schedule.start_at)
    if schedule.end_at is not None:
        end = min(end, schedule.end_at + _MICROSECOND)
    fires: list[datetime] = []
    after = start - _MICROSECOND
    while len(fires) <= limit:
        after = next_fire_after(schedule, after)
        if after >= end:
            break
        fires.append(after)
    return fires


def _cron_fires(
    schedule: Timed, after: datetime, scan_starts: ScanStarts | None = None
) -> Iterator[tuple[datetime, ...]]:
    """For each matching wall-clock time that may fire after ``after``: its instants."""
    assert schedule.cron is not None
    expression, zone = cron.parse_cron(schedule.cron), schedule.zone
    fixed = expression.fixed_time
    if scan_starts is None:
        local = _scan_start(after, zone)
    else:  # by UTC: two readings of a repeated wall time (fold 0 and 1) are equal in Python
        key = (after.astimezone(UTC), zone)
        local = scan_starts.get(key) or scan_starts.setdefault(key, _scan_start(after, zone))
    while True:
        local = expression.next_match(local)
        instants = dst.instants(local, zone)
        if instants:
            # Fixed-time jobs run once, in the first pass; wildcard jobs follow the clock.
            yield instants[:1] if fixed else instants
            continue
        gap_end = dst.gap_end(local, zone)
        if fixed:
            yield (gap_end,)  # skipped by the clock: run the moment the gap ends
        # Later times in the gap fire at the same instant, or (wildcard) not at all.
        local = max(local, dst.wall_time(gap_end, zone) - _MINUTE)


def _scan_start(after: datetime, zone: ZoneInfo) -> datetime:
    """A naive local time before every wall-clock time that can fire after ``after``."""
    # Fires up to the next transition have wall times after `after`'s own. Only a
    # fall-back moves the clock back: its repeated wall times (from the moment it
    # happens, read in the new offset) may come before `after`'s wall time, yet fire
    # later. A day ahead covers every real transition.
    utc = after.astimezone(UTC)
    start = dst.wall_time(utc, zone)
    if dst.utc_offset(utc + _DAY, zone) < dst.utc_offset(utc, zone):
        change = dst.transition_between(utc, utc + _DAY, zone)
        start = min(start, dst.wall_time(change, zone) - _SECOND)
    return start.replace(second=0, microsecond=0)


def _every_between(every: timedelta, start: datetime, end: datetime) -> list[datetime]:
    first = _EPOCH + ((start - _EPOCH) // every + 1) * every
    if first > end:
        return []
    return [first + n * every for n in range((end - first) // every + 1)]
