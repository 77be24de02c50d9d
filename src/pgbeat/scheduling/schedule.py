"""The ``Schedule`` model and its fire times, with pgbeat's daylight-saving policy.

Pure: every instant is passed in and every answer is an aware UTC datetime, so the
scheduler and the ``schedules next`` preview agree on every replica. Cron expressions
are matched on naive local wall-clock time (croniter, imported here only) and mapped
to instants by our own Debian/Vixie-cron DST rules (see docs/dst.md).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, CroniterError, croniter
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)

from pgbeat.durations import MAX_DURATION, format_duration, parse_duration
from pgbeat.scheduling import dst

CatchUp = Literal["none", "latest", "all"]
Overlap = Literal["allow", "skip"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_DAY = timedelta(days=1)
_ALIASES = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
}
_NAME = re.compile(r"[A-Za-z0-9_.:-]+")
# "localtime" (and "posixrules") are whatever the host's zone files point at, and
# "right/*" clocks count leap seconds: replicas on different hosts would disagree, so
# none is accepted even when zoneinfo loads it.
_HOST_ZONES = frozenset({"localtime", "posixrules"})
# No clock is read: fire times repeat with the calendar, so "fires within ten years of
# a fixed date" is the same test as "ever fires" (Feb 29 included). Naive on purpose:
# croniter only ever sees local wall-clock time.
_FIRES_CHECK_FROM = datetime(2000, 1, 1)  # noqa: DTZ001
_FIRES_CHECK_YEARS = 10


@dataclass(frozen=True)
class _CronField:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()

    def problem(self, value: str) -> str | None:
        """Why ``value`` (a number or a name) cannot appear in this field, if it cannot."""
        if value.isdigit():
            if self.low <= int(value) <= self.high:
                return None
            return f"{self.name} {value} is out of range {self.low}-{self.high}"
        if value in self.names:
            return None
        return f"{self.name} {value!r} is not a number{' or a name' if self.names else ''}"


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS = (
    _CronField("minute", 0, 59),
    _CronField("hour", 0, 23),
    _CronField("day-of-month", 1, 31),
    _CronField("month", 1, 12, _MONTHS),
    _CronField("day-of-week", 0, 7, _WEEKDAYS),
)
# Standard cron only: croniter's extensions (L, W, #, H, ?) have no place in Vixie cron.
_ITEM = re.compile(r"(?:\*|([0-9a-z]+)(?:-([0-9a-z]+))?)(?:/([0-9]+))?")


class Schedule(BaseModel):
    """One recurring job: when it fires (cron in a time zone, or a fixed interval) and what."""

    # strict: a TOML `max_attempts = "3"` or `enabled = "yes"` is a mistake, not a value.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    name: str
    kind: str = Field(min_length=1)
    cron: str | None = None
    every: timedelta | None = None
    timezone: str = "UTC"
    payload: dict[str, Any] = {}
    max_attempts: int | None = Field(default=None, ge=1)
    catch_up: CatchUp = "latest"
    catch_up_window: timedelta = timedelta(hours=1)
    # "skip": no new period while an earlier job of this schedule is pending or running.
    overlap: Overlap = "allow"
    # Each period's run_at is delayed by a fixed offset in [0, jitter) (scheduling/jitter.py).
    jitter: timedelta | None = None
    enabled: bool = True

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(f"{value!r} has characters other than letters, digits and _ . : -")
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
    def _check_payload(cls, value: dict[str, Any]) -> dict[str, Any]:
        # The payload is stored as jsonb: reject what JSON cannot hold (TOML dates, nan).
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as error:
            raise ValueError(f"must be JSON data ({error})") from None
        except RecursionError:
            raise ValueError("nested too deeply") from None
        return value

    @model_validator(mode="after")
    def _check_cron_or_every(self) -> Schedule:
        if self.cron is not None and self.every is not None:
            raise ValueError("set either 'cron' or 'every', not both")
        if self.cron is None and self.every is None:
            raise ValueError("missing 'cron' or 'every' (set exactly one)")
        return self

    @field_serializer("every", "catch_up_window", "jitter", when_used="json")
    def _show_duration(self, value: timedelta | None) -> str | None:
        return None if value is None else format_duration(value)

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's time zone (cron wall-clock times are read in it)."""
        return ZoneInfo(self.timezone)

    @property
    def is_fixed_time(self) -> bool:
        """True for a cron whose minute and hour fields have no ``*`` (a fixed local time)."""
        if self.cron is None:
            return False
        minute, hour = _five_fields(self.cron).split()[:2]
        return "*" not in minute and "*" not in hour


def validate_cron(expr: str) -> str:
    """Return ``expr`` normalised (lower case, single spaces) or raise ``ValueError``."""
    normalised = " ".join(expr.split()).lower()
    problem = _cron_problem(normalised)
    if problem is not None:
        raise ValueError(f"bad cron expression {expr!r}: {problem}")
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


def next_fire_after(schedule: Schedule, after: datetime) -> datetime:
    """The first fire instant strictly after ``after``, as an aware UTC datetime."""
    _require_aware(after=after)
    if schedule.every is not None:
        return _EPOCH + ((after - _EPOCH) // schedule.every + 1) * schedule.every
    candidates: list[datetime] = []
    for instants in _cron_fires(schedule, after):
        candidates.extend(t for t in instants if t > after)
        # A repeated (fall-back) hour can put an earlier fire after a later match, but
        # nothing after this wall-clock time fires before its first instant.
        if instants[0] > after:
            return min(candidates)
    raise AssertionError("unreachable: cron matches never run out")


def fire_times_after(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` fire instants strictly after ``after``, ascending, in UTC."""
    if count < 0:
        raise ValueError(f"count must not be negative, got {count}")
    fires: list[datetime] = []
    for _ in range(count):
        after = next_fire_after(schedule, after)
        fires.append(after)
    return fires


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


def _is_zone_name(name: str) -> bool:
    if name in _HOST_ZONES or name.startswith("right/"):
        return False
    try:
        ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # not found, not a key, a directory, not TZif
        return False
    return True


def _five_fields(cron: str) -> str:
    return _ALIASES.get(cron, cron)


@functools.lru_cache(maxsize=4096)
def _cron_problem(normalised: str) -> str | None:
    if normalised.startswith("@"):
        if normalised in _ALIASES:
            return None
        return f"unknown shortcut (use {', '.join(_ALIASES)})"
    fields = normalised.split()
    if len(fields) != len(_FIELDS):
        return f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}"
    for text, field in zip(fields, _FIELDS, strict=True):
        problem = _field_problem(text, field)
        if problem is not None:
            return problem
    return _firing_problem(normalised)


def _field_problem(text: str, field: _CronField) -> str | None:
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            return f"{field.name} field {text!r} is not valid (use numbers, names, * , - /)"
        low, high, step = match.groups()
        for value in (low, high):
            problem = None if value is None else field.problem(value)
            if problem is not None:
                return problem
        if step is not None and int(step) == 0:
            return f"{field.name} step must be at least 1"
    return None


def _firing_problem(fields: str) -> str | None:
    try:
        _template(fields).get_next(datetime, update_current=False)
    except CroniterBadDateError:
        return "never fires (no month has that day)"
    except CroniterError as error:
        return re.sub(r"^\[.*?\] ", "", str(error))
    return None


@functools.lru_cache(maxsize=4096)
def _template(fields: str) -> croniter[datetime]:
    # Parsing costs ~35 us; copying a parsed template costs ~2 us.
    return croniter(
        fields,
        _FIRES_CHECK_FROM,
        ret_type=datetime,
        max_years_between_matches=_FIRES_CHECK_YEARS,
    )


def _wall_clock_matches(cron: str, after: datetime) -> croniter[datetime]:
    """A croniter yielding naive local wall-clock matches strictly after naive ``after``."""
    matches = copy.copy(_template(_five_fields(cron)))
    matches.set_current(after, force=True)
    return matches


def _cron_fires(schedule: Schedule, after: datetime) -> Iterator[tuple[datetime, ...]]:
    """For each matching wall-clock time that may fire after ``after``: its instants."""
    assert schedule.cron is not None
    zone, fixed = schedule.zone, schedule.is_fixed_time
    matches = _wall_clock_matches(schedule.cron, _scan_start(after, zone))
    while True:
        local = matches.get_next(datetime)
        instants = dst.instants(local, zone)
        if instants:
            # Fixed-time jobs run once, in the first pass; wildcard jobs follow the clock.
            yield instants[:1] if fixed else instants
            continue
        gap_end = dst.gap_end(local, zone)
        if fixed:
            yield (gap_end,)  # skipped by the clock: run the moment the gap ends
        # Later times in the gap fire at the same instant, or (wildcard) not at all.
        resume = max(local, dst.wall_time(gap_end, zone) - _MINUTE)
        matches.set_current(resume, force=True)


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
