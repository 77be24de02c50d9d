"""The ``Schedule`` model: what a schedule is, its fields' rules, and its periods' keys.

Pure. When a schedule fires is in fires.py.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeVar
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

from pgbeat import job_inputs, limits
from pgbeat.durations import MAX_DURATION, format_duration, parse_duration
from pgbeat.scheduling import cron
from pgbeat.scheduling.timing import Timing, zone_named

CatchUp = Literal["none", "latest", "all"]
Overlap = Literal["allow", "skip", "buffer_one", "cancel_other"]

_SECOND = timedelta(seconds=1)
_D = TypeVar("_D", timedelta, timedelta | None)


def _at_most_max(value: _D) -> _D:
    """A duration no longer than MAX_DURATION: a timedelta given in code skips
    parse_duration's check."""
    if value is not None and value > MAX_DURATION:
        raise ValueError(f"must be at most {MAX_DURATION.days} days")
    return value


_FIRST = datetime(1970, 1, 1, tzinfo=UTC)
_LAST = datetime(9999, 1, 1, tzinfo=UTC)
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
    tags: tuple[str, ...] | None = None  # given to its jobs (job_inputs.check_tags's limits)
    # A period whose job has not ended done this long after its fire time is late
    # (lateness.py); on_late names the kind of the one job enqueued for each late period.
    deadline: timedelta | None = None
    on_late: str | None = Field(default=None, max_length=limits.MAX_KIND_LENGTH)

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

    @field_validator("tags", mode="before")
    @classmethod
    def _check_tags(cls, value: object) -> object:
        # a TOML array, a list in code, the text[] of a row: the rules of a job's tags
        try:
            tags = job_inputs.check_tags(value, "tags")
        except TypeError as exc:  # pydantic reports a ValueError as the field's problem,
            raise ValueError(str(exc)) from None  # where a TypeError escaped as a traceback
        return None if tags is None else tuple(tags)

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str | None) -> str | None:
        return None if value is None else validate_cron(value)

    @field_validator("every", "catch_up_window", "jitter", "deadline", mode="before")
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
        return _at_most_max(value)

    @field_validator("catch_up_window")
    @classmethod
    def _check_window(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be greater than zero")
        return _at_most_max(value)

    @field_validator("jitter")
    @classmethod
    def _check_jitter(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value < timedelta(0):
            raise ValueError("must not be negative")
        return _at_most_max(value) or None  # timedelta(0) from code is no jitter

    @field_validator("deadline")
    @classmethod
    def _check_deadline(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError(f"must be greater than zero (got {format_duration(value) or '0s'})")
        return _at_most_max(value)

    @field_validator("on_late")
    @classmethod
    def _check_on_late(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\x00" in value):
            raise ValueError("must name a job kind (a non-empty name without NUL characters)")
        return value

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

    @field_serializer("every", "catch_up_window", "jitter", "deadline", when_used="json")
    def _show_duration(self, value: timedelta | None) -> str | None:
        return None if value is None else format_duration(value)

    @property
    def zone(self) -> ZoneInfo:
        """The schedule's time zone (cron wall-clock times are read in it)."""
        return zone_named(self.timezone)

    @property
    def timing(self) -> Timing:
        """When it fires, as the one value the fire times, groups and descriptions read."""
        return Timing(self.cron, self.every, self.timezone)

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
    require_aware(fire_at=fire_at)
    return f"{fire_at.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def require_aware(**values: datetime) -> None:
    """Raise ``ValueError`` naming each of ``values`` that is a naive datetime."""
    for label, value in values.items():
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{label} must be a timezone-aware datetime, got {value!r}")


@functools.lru_cache(maxsize=1024)  # zoneinfo keeps only 8 zones: a miss reads the zone file
def _is_zone_name(name: str) -> bool:
    if name in _HOST_ZONES or name.startswith("right/"):
        return False
    try:
        ZoneInfo(name)
    except (KeyError, ValueError, OSError):  # not found, not a key, a directory, not TZif
        return False
    return True
