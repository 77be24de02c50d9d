"""The ``Schedule`` model and its fire times, with pgbeat's daylight-saving policy.

Pure: every instant is passed in and every answer is an aware UTC datetime, so the
scheduler and the ``schedules next`` preview agree on every replica. Cron expressions
are read and matched on naive local wall-clock time as Debian's cron does (cron.py) and
mapped to instants by Debian/Vixie cron's DST rules (see docs/cron.md).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from pgbeat import limits
from pgbeat.durations import MAX_DURATION, format_duration, parse_duration
from pgbeat.scheduling import cron, dst

CatchUp = Literal["none", "latest", "all"]
Overlap = Literal["allow", "skip", "buffer_one", "cancel_other"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_MICROSECOND = timedelta(microseconds=1)
_FIRST = datetime(1970, 1, 1, tzinfo=UTC)
_LAST = datetime(9999, 1, 1, tzinfo=UTC)
_DAY = timedelta(days=1)
_NAME = re.compile(r"[A-Za-z0-9_.:-]+")
_NOT_NAMES = (".", "..")
# "localtime" (and "posixrules") are whatever the host's zone files point at, and
# "right/*" clocks count leap seconds: replicas on different hosts would disagree, so
# none is accepted even when zoneinfo loads it.
_HOST_ZONES = frozenset({"localtime", "posixrules"})


# The validation context of a row read from pgbeat_schedules: its payload came out of a
# jsonb column, so it is JSON data the database stores (no NaN, no NUL, decoded already).
FROM_JSONB = "payload_from_jsonb"


class Schedule(BaseModel):
    """One recurring job: when it fires (cron in a time zone, or a fixed interval) and what."""

    # strict: a TOML `max_attempts = "3"` or `enabled = "yes"` is a mistake, not a value.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str = Field(max_length=limits.MAX_KIND_LENGTH)
    kind: str = Field(min_length=1, max_length=limits.MAX_KIND_LENGTH)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"
    payload: dict[str, Any] = {}
    max_attempts: int | None = Field(default=None, ge=1, le=limits.MAX_ATTEMPTS)
    catch_up: CatchUp = "latest"
    catch_up_window: timedelta = timedelta(hours=1)
    # While an earlier job of this schedule is pending or running, a new period is: "skip"
    # skipped; "buffer_one" kept waiting (one at most) until that job ends; "cancel_other"
    # enqueued, and the running job asked to stop. "allow": enqueued regardless.
    overlap: Overlap = "allow"
    # Each period's run_at is delayed by a fixed offset in [0, jitter) (scheduling/jitter.py).
    jitter: timedelta | None = None
    enabled: bool = True
    # No period before start_at or after end_at (aware instants; None: no bound).
    start_at: datetime | None = None
    end_at: datetime | None = None
    # After this many consecutive periods whose jobs ended failed, the schedule pauses.
    pause_after_failures: int | None = Field(default=None, ge=1, le=1_000_000)
    queue: str = Field(default="default", min_length=1, max_length=limits.MAX_KIND_LENGTH)
    priority: int = Field(default=0, ge=-32768, le=32767)  # higher runs first (smallint)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"{value!r} has characters other than letters, digits and _ . : -")
        if value in _NOT_NAMES:  # as a path segment of a link it names another page
            raise ValueError(f"{value!r} is not a schedule name: use a letter or a digit")
        return value

    @field_validator("kind")
    @classmethod
    def _check_kind(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("contains a NUL character, which the database cannot store")
        return value

    @field_validator("start_at", "end_at", mode="before")
    @classmethod
    def _parse_instant(cls, value: object) -> object:
        # ISO-8601 with an offset, as TOML's offset date-times or text in code and JSON.
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"expected an ISO-8601 time with offset, got {value!r}") from None
        if isinstance(value, datetime):
            if value.tzinfo is None or value.utcoffset() is None:
                raise ValueError(f"needs a UTC offset (e.g. '+00:00' or 'Z'), got {value}")
            if not _FIRST <= value.astimezone(UTC) <= _LAST:
                raise ValueError(f"must be between the years 1970 and 9999, got {value}")
            return value.astimezone(UTC)
        if value is None:
            return value
        raise ValueError(f"expected an ISO-8601 time with offset, got {value!r}")

    @field_validator("queue")
    @classmethod
    def _check_queue(cls, value: str) -> str:
        if "\x00" in value or not value.strip():
            raise ValueError("must be a non-empty name without NUL characters")
        return value

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str | None) -> str | None:
        return None if value is None else validate_cron(value)

    @field_validator("every", "catch_up_window", "jitter", mode="before")
    @classmethod
    def _parse_duration(cls, value: object) -> object:
        # Durations are written like "30s" or "1h30m", in schedules.toml and in code alike.
        if isinstance(value, str):
            return parse_duration(value)
        if value is None or isinstance(value, timedelta):
            return value
        raise ValueError(f"expected a duration such as '30s' or '1h30m', got {value!r}")

    @field_validator("every")
    @classmethod
    def _check_every(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and (value < _SECOND or value % _SECOND):
            shown = format_duration(value) or "0s"
            raise ValueError(f"must be a whole number of seconds, at least 1s (got {shown})")
        if value is not None and value > MAX_DURATION:
            raise ValueError(f"must be at most {MAX_DURATION.days} days")
        return value

    @field_validator("catch_up_window")
    @classmethod
    def _check_window(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be greater than zero")
        if value > MAX_DURATION:  # a timedelta given in code skips parse_duration's check
            raise ValueError(f"must be at most {MAX_DURATION.days} days")
        return value

    @field_validator("jitter")
    @classmethod
    def _check_jitter(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value < timedelta(0):
            raise ValueError("must not be negative")
        if value is not None and value > MAX_DURATION:
            raise ValueError(f"must be at most {MAX_DURATION.days} days")
        return value or None  # timedelta(0) from code is no jitter

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        if not _is_zone_name(value):
            raise ValueError(f"unknown time zone {value!r} (use an IANA name like 'Europe/Berlin')")
        return value

    @field_validator("payload")
    @classmethod
    def _check_payload(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        # The payload is stored as jsonb: reject what JSON cannot hold (TOML dates, nan).
        # One read from a jsonb column is such data already (a replica loads 100,000 rows).
        if info.context is not None and info.context.get(FROM_JSONB):
            return value
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"must be JSON data ({error})") from None
        except RecursionError:
            raise ValueError("nested too deeply") from None
        problem = limits.payload_problem(value)
        if problem is not None:
            raise ValueError(f"{problem}, which the database cannot store")
        return value

    @model_validator(mode="after")
    def _check_cron_or_every(self) -> Schedule:
        if self.cron is not None and self.every is not None:
            raise ValueError("set either 'cron' or 'every', not both")
        if self.cron is None and self.every is None:
            raise ValueError("missing 'cron' or 'every' (set exactly one)")
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            raise ValueError("end_at must be after start_at")
        return self

    def in_window(self, fire: datetime) -> bool:
        """Whether a period firing at ``fire`` lies within ``start_at`` .. ``end_at``."""
        return (self.start_at is None or fire >= self.start_at) and (
            self.end_at is None or fire <= self.end_at
        )

    @field_serializer("every", "catch_up_window", "jitter", when_used="json")
    def _show_duration(self, value: timedelta | None) -> str | None:
        return None if value is None else format_duration(value)

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's time zone (cron wall-clock times are read in it)."""
        return _zone(self.timezone)

    @property
    def is_fixed_time(self) -> bool:
        """True for a cron whose minute and hour fields do not begin with ``*`` (Debian's rule)."""
        return self.cron is not None and cron.parse_cron(self.cron).fixed_time


def is_schedule_name(value: object) -> bool:
    """Whether ``Schedule`` accepts ``value`` as a name (its every rule, without a model)."""
    return (
        isinstance(value, str)
        and len(value) <= limits.MAX_KIND_LENGTH
        and _NAME.fullmatch(value) is not None
        and value not in _NOT_NAMES
    )


def timing_fields(cron: object, timezone: object) -> tuple[str | None, str] | None:
    """``cron`` (normalised) and ``timezone`` as ``Schedule`` holds them, or None where it
    refuses either: the two fields' own rules, without a model (``every`` and the rule
    that one of cron and every is set are the model's, and not checked here)."""
    if not isinstance(timezone, str) or not _is_zone_name(timezone):
        return None
    if cron is None:
        return None, timezone
    if not isinstance(cron, str):
        return None
    try:
        return validate_cron(cron), timezone
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)  # pure: a replica's 100,000 rows share a few thousand
def validate_cron(expr: str) -> str:
    """Return ``expr`` normalised (single spaces, lower-case names) or raise ``ValueError``.

    Accepts what Debian's cron accepts, less what it would accept with no sensible
    meaning (reversed ranges, text after a field); see docs/cron.md.
    """
    normalised = cron.normalise(expr)
    try:
        cron.parse_cron(normalised)
    except ValueError as error:
        raise ValueError(f"bad cron expression {expr!r}: {error}") from None
    return normalised


def fire_times_between(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """All fire instants t with start < t <= end, sorted, deduplicated, as aware UTC datetimes."""
    _require_aware(start=start, end=end)
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
    schedule: Schedule, after: datetime, scan_starts: ScanStarts | None = None
) -> datetime:
    """The first fire instant strictly after ``after``, as an aware UTC datetime."""
    _require_aware(after=after)
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
    _require_aware(start=start, end=end)
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


def has_ended(schedule: Schedule, now: datetime) -> bool:
    """True once ``end_at`` has passed: the schedule has no period left."""
    return schedule.end_at is not None and now > schedule.end_at


def unique_key(schedule: Schedule, fire_at: datetime) -> str:
    """The job key of one period, e.g. ``daily_report@2026-03-29T01:00:00Z`` (UTC, seconds)."""
    return unique_key_prefix(schedule) + unique_key_suffix(fire_at)


def unique_key_prefix(schedule: Schedule) -> str:
    """The schedule's part of its periods' keys; the scheduler computes it once per schedule."""
    return f"{schedule.name}@"


def unique_key_suffix(fire_at: datetime) -> str:
    """The fire time's part of a period's key, shared by every schedule that fires then."""
    _require_aware(fire_at=fire_at)
    return f"{fire_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def _require_aware(**values: datetime) -> None:
    for label, value in values.items():
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{label} must be a timezone-aware datetime, got {value!r}")


@functools.lru_cache(maxsize=1024)  # zoneinfo keeps only 8 zones: a miss reads the zone file
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


@functools.lru_cache(maxsize=1024)  # zoneinfo keeps only 8 zones: a miss reads the zone file
def _is_zone_name(name: str) -> bool:
    if name in _HOST_ZONES or name.startswith("right/"):
        return False
    try:
        ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # not found, not a key, a directory, not TZif
        return False
    return True


def _cron_fires(
    schedule: Schedule, after: datetime, scan_starts: ScanStarts | None = None
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
