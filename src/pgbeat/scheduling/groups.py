"""What a scheduler replica's catalog holds: schedules as members of groups that fire alike
(one policy: cron or interval, zone and catch-up), the job templates they share, and the
spans (pauses, start/end windows) whose periods a member never enqueues.

Rows in, values out, no statements: the catalog (catalog.py) keeps them in step with the table.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from pgbeat.jobs import payloads
from pgbeat.scheduling.catchup import keep_for
from pgbeat.scheduling.schedule import Schedule
from pgbeat.scheduling.timing import Timing

Gaps = tuple[tuple[datetime | None, datetime], ...]  # (after, until] spans, None: always


_MICROSECOND = timedelta(microseconds=1)
_END_OF_TIME = datetime.max.replace(tzinfo=UTC)


class Policy(NamedTuple):
    """How the schedules of a group fire: their timing and catch-up policy.

    What the fire-time and catch-up functions read (``catchup.CatchingUp``), without a
    ``Schedule``: a replica keeps tens of thousands of groups.
    """

    timing: Timing
    catch_up: str
    catch_up_window: timedelta

    @property
    def cron(self) -> str | None:
        return self.timing.cron

    @property
    def every(self) -> timedelta | None:
        return self.timing.every

    @property
    def zone(self) -> ZoneInfo:
        return self.timing.zone


class Template(NamedTuple):
    """What a schedule's jobs have in common with other schedules' (often all of it)."""

    payload: str  # JSON
    max_attempts: int
    keep_seconds: float
    queue: str
    priority: int
    tags: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Definition:
    """What a replica runs of a validated schedule, but its name and payload.

    Rows that differ only in those share one (catalog.py validates such rows once).
    """

    policy: Policy
    kind: str
    jitter: timedelta | None
    overlap: str
    max_attempts: int
    keep_seconds: float
    queue: str
    priority: int
    tags: tuple[str, ...] | None = None
    deadline: timedelta | None = None  # its periods are watched (lateness.py)

    @classmethod
    def of(cls, schedule: Schedule) -> Definition:
        return cls(
            policy_of(schedule),
            schedule.kind,
            schedule.jitter,
            schedule.overlap,
            schedule.max_attempts or payloads.DEFAULT_MAX_ATTEMPTS,
            keep_for(schedule).total_seconds(),
            schedule.queue,
            schedule.priority,
            schedule.tags,
            schedule.deadline,
        )

    def retimed(self, cron: str | None, timezone: str) -> Definition:
        """This definition with another cron and zone (validated by the caller)."""
        timing = Timing(cron, self.policy.timing.every, timezone)
        return Definition(
            self.policy._replace(timing=timing),
            self.kind,
            self.jitter,
            self.overlap,
            self.max_attempts,
            self.keep_seconds,
            self.queue,
            self.priority,
            self.tags,
            self.deadline,
        )

    def template(self, payload: str) -> Template:
        """The template of a schedule with this definition and ``payload`` (JSON text, as
        the jsonb column gives it: no second encoding of 100,000 payloads)."""
        return Template(
            payload, self.max_attempts, self.keep_seconds, self.queue, self.priority, self.tags
        )


@dataclass(eq=False, slots=True)
class Member:
    """One schedule of a group: what its periods need beside the group's fire times.

    Small on purpose (no ``Schedule`` object): a replica keeps 100,000 of them.
    """

    name: str
    kind: str
    jitter: timedelta | None
    overlap: str
    definition_hash: str
    template: int
    gaps: Gaps  # spans whose periods are never enqueued (gaps_of)
    created_at: datetime  # no period before it is reported missed


@dataclass(eq=False, slots=True)
class Group:
    """Schedules with one policy and one last tick: their due periods are the same."""

    policy: Policy
    members: dict[str, Member] = field(default_factory=dict)
    last_tick: datetime | None = None
    next_fire: datetime | None = None
    alive: bool = True


def gaps_of(row: Mapping[str, Any]) -> Gaps:
    """The spans whose periods a schedule never enqueues, as (after, until] pairs.

    The last pause (``paused_at`` to ``resumed_at``): resuming does not catch it up. For a
    schedule created from code, everything until its creation. A file's schedules existed
    in the file before the table had them: a replica catches up their missed periods as it
    always did. Everything before ``start_at`` and after ``end_at``.
    """
    gaps: list[tuple[datetime | None, datetime]] = []
    if row.get("start_at") is not None:
        gaps.append((None, row["start_at"] - _MICROSECOND))
    if row.get("end_at") is not None:
        gaps.append((row["end_at"], _END_OF_TIME))
    if row["source"] == "api":
        gaps.append((None, row["created_at"]))
    paused_at, resumed_at = row["paused_at"], row["resumed_at"]
    if paused_at is not None and resumed_at is not None and resumed_at > paused_at:
        gaps.append((paused_at, resumed_at))
    return tuple(gaps)


def outside(fires: Sequence[datetime], gaps: Gaps) -> Sequence[datetime]:
    """The fire times in none of the gaps."""
    if not gaps:
        return fires
    return [f for f in fires if not any((a is None or f > a) and f <= b for a, b in gaps)]


def policy_of(schedule: Schedule) -> Policy:
    return Policy(schedule.timing, schedule.catch_up, schedule.catch_up_window)


@dataclass
class Templates:
    """Templates by number (from 1), counted by use so that unused ones are forgotten."""

    numbers: dict[Template, int] = field(default_factory=dict)
    by_number: dict[int, Template] = field(default_factory=dict)
    uses: dict[int, int] = field(default_factory=dict)
    _next: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def take(self, template: Template) -> int:
        number = self.numbers.get(template)
        if number is None:
            number = self.numbers[template] = next(self._next)
            self.by_number[number] = template
        self.uses[number] = self.uses.get(number, 0) + 1
        return number

    def release(self, number: int) -> None:
        self.uses[number] -= 1
        if not self.uses[number]:
            del self.uses[number], self.numbers[self.by_number.pop(number)]
