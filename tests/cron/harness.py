"""Differential testing of pgbeat's cron fire times against two other voices.

- cronsim (PyPI, by another author): a cron evaluator that models Debian's cron, its day
  rule and its DST handling;
- a brute-force model: walk every UTC minute, read the wall clock, apply crontab(5) and
  Debian's DST rules literally (nothing of pgbeat's or cronsim's search code).

The expressions, zones and start instants come from here; ``compare_case`` runs one case
and says how the voices disagree, if they do. Pure: no clock is read.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from pgbeat.scheduling.schedule import Schedule, fire_times_after, fire_times_between

FIRES = 6  # the next N fire instants compared with cronsim
WINDOW = timedelta(hours=36)  # the stretch after the start compared with the brute force
YEARS = range(2020, 2031)
NEAR_TRANSITION = timedelta(hours=3)
WARM_UP = timedelta(hours=3)

# Both hemispheres; whole, half-hour and 45-minute offsets; 30-minute and 2-hour DST
# shifts; changes at midnight; zones that dropped or changed their rules in 2020-2030.
ZONES = (
    "UTC",
    "Europe/Berlin",
    "Europe/London",
    "Europe/Dublin",  # tzdata models Irish summer time as standard, winter as negative DST
    "Europe/Lisbon",
    "Europe/Chisinau",
    "Europe/Volgograd",  # +04 -> +03 in December 2020
    "Europe/Moscow",
    "America/New_York",
    "America/Chicago",
    "America/Los_Angeles",
    "America/Phoenix",
    "America/St_Johns",  # -03:30 / -02:30
    "America/Havana",  # changes at midnight
    "America/Santiago",  # southern hemisphere, changes at midnight
    "America/Asuncion",  # changes at midnight; permanent -03 since October 2024
    "America/Sao_Paulo",  # no DST since 2019
    "America/Mexico_City",  # no DST since 2022
    "America/Godthab",  # old name of America/Nuuk
    "America/Nuuk",  # -03 -> -02 in 2023, DST again from 2024, changes at 22:00 / 23:00
    "America/Scoresbysund",  # -01 -> -02 in 2024
    "America/Whitehorse",  # permanent -07 since November 2020
    "Atlantic/Azores",  # changes at 00:00 / 01:00
    "Africa/Casablanca",  # +01, +00 during Ramadan
    "Africa/El_Aaiun",
    "Africa/Cairo",  # DST again since 2023, changes at midnight
    "Asia/Amman",  # changes at midnight; permanent +03 since 2022
    "Asia/Damascus",  # changes at midnight; permanent +03 since 2022
    "Asia/Beirut",  # changes at midnight
    "Asia/Gaza",
    "Asia/Jerusalem",
    "Asia/Tehran",  # +03:30 / +04:30 until 2022, changes at midnight
    "Asia/Kolkata",  # +05:30
    "Asia/Kathmandu",  # +05:45
    "Asia/Yangon",  # +06:30
    "Asia/Tokyo",
    "Australia/Sydney",
    "Australia/Adelaide",  # +09:30 / +10:30
    "Australia/Lord_Howe",  # +10:30 / +11: a 30-minute shift
    "Australia/Eucla",  # +08:45
    "Australia/Brisbane",
    "Antarctica/Troll",  # +00 / +02: a 2-hour shift
    "Antarctica/Macquarie",
    "Pacific/Auckland",
    "Pacific/Chatham",  # +12:45 / +13:45
    "Pacific/Norfolk",  # DST since 2019
    "Pacific/Apia",  # DST dropped in 2021
    "Pacific/Fiji",
    "Pacific/Easter",
    "Pacific/Marquesas",  # -09:30
    "Pacific/Kiritimati",  # +14
)

# What Debian's cron sets for each shortcut (entry.c), written out as five fields.
SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


# -- what the compared code says -------------------------------------------------------------


def pgbeat_schedule(expr: str, zone: str) -> Schedule:
    """The schedule pgbeat would load from ``cron = expr``, ``timezone = zone``."""
    return Schedule(name="case", kind="case", cron=expr, timezone=zone)


def pgbeat_next(expr: str, zone: str, start: datetime, count: int) -> list[datetime]:
    return fire_times_after(pgbeat_schedule(expr, zone), start, count)


def pgbeat_between(expr: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    return fire_times_between(pgbeat_schedule(expr, zone), start, end)


def cronsim_next(expr: str, zone: str, start: datetime, count: int) -> list[datetime]:
    """cronsim's next ``count`` fires strictly after ``start``, in UTC.

    cronsim walks a fixed-time job on the naive wall clock, so from a start inside a
    repeated (fall-back) hour it can return the first pass's earlier instants: skip them.
    """
    fires: list[datetime] = []
    # cronsim has no @shortcuts: give it the five fields Debian's cron sets for each.
    simulation = CronSim(SHORTCUTS.get(expr, expr), start.astimezone(ZoneInfo(zone)))
    try:
        for fire in simulation:
            instant = fire.astimezone(UTC)
            if instant > start:
                fires.append(instant)
            if len(fires) == count:
                break
    except StopIteration:  # no fire within cronsim's 50-year horizon
        pass
    return fires


# -- the brute-force model -------------------------------------------------------------------


@dataclass(frozen=True)
class Fields:
    """An expression's allowed values and crontab(5)'s two flags, read the simplest way."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_and: bool  # a day field begins with "*": both day fields must match
    fixed_time: bool  # neither minute nor hour begins with "*"

    def matches(self, wall: datetime) -> bool:
        in_month = wall.day in self.days
        in_week = wall.isoweekday() % 7 in self.weekdays
        day = in_month and in_week if self.days_and else in_month or in_week
        return (
            day
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
        )


@functools.lru_cache(maxsize=1024)
def fields_of(expr: str) -> Fields:
    """The brute force's own reading of a valid expression (no validation: tests make them)."""
    minute, hour, day, month, weekday = SHORTCUTS.get(expr, expr).lower().split()
    return Fields(
        minutes=_expand(minute, 0, 59),
        hours=_expand(hour, 0, 23),
        days=_expand(day, 1, 31),
        months=_expand(month, 1, 12, MONTH_NAMES, offset=1),
        weekdays=frozenset(d % 7 for d in _expand(weekday, 0, 7, DAY_NAMES)),
        days_and=day.startswith("*") or weekday.startswith("*"),
        fixed_time=not (minute.startswith("*") or hour.startswith("*")),
    )


def _expand(
    text: str, low: int, high: int, names: tuple[str, ...] = (), offset: int = 0
) -> frozenset[int]:
    """``*``, ``a``, ``a-b``, each with an optional ``/step``, comma-separated."""
    values: set[int] = set()
    for item in text.split(","):
        body, _, step = item.partition("/")
        if body == "*":
            first, last = low, high
        else:
            ends = [
                names.index(end) + offset if end in names else int(end) for end in body.split("-")
            ]
            first, last = ends[0], ends[-1]
        values.update(range(first, last + 1, int(step or 1)))
    return frozenset(values)


def _number(text: str, names: tuple[str, ...], offset: int) -> int:
    return names.index(text) + offset if text in names else int(text)


def brute_force_between(expr: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """Fires in (start, end] by walking every UTC minute and reading the wall clock.

    Debian's rules, literally: a wildcard job runs whenever the wall clock shows a
    matching minute; a fixed-time job runs when the wall clock shows a matching minute
    for the first time (not again when a fall-back repeats it), and at the first minute
    after a spring-forward jump for every matching minute the jump skipped.
    """
    fields, tz = fields_of(expr), ZoneInfo(zone)
    fires: list[datetime] = []
    # Start early enough to have seen the first pass of any repeated hour (2 h at most).
    instant = start.replace(second=0, microsecond=0) - WARM_UP
    previous = _wall(instant, tz)
    seen_up_to = previous  # fixed-time: wall times up to here have had their turn
    while instant < end:
        instant += timedelta(minutes=1)
        wall = _wall(instant, tz)
        step = wall - previous
        if fields.fixed_time:
            skipped = _minutes_between(previous, wall) if step > timedelta(minutes=1) else []
            first_time = wall > seen_up_to
            if any(map(fields.matches, skipped)) or (first_time and fields.matches(wall)):
                fires.append(instant)
            seen_up_to = max(seen_up_to, wall)
        elif fields.matches(wall):
            fires.append(instant)
        previous = wall
    return [fire for fire in fires if start < fire <= end]


def _wall(instant: datetime, tz: ZoneInfo) -> datetime:
    """The wall clock at ``instant``, to the minute; a whole-minute clock, as cron reads it."""
    return instant.astimezone(tz).replace(tzinfo=None, second=0, microsecond=0)


def _minutes_between(before: datetime, after: datetime) -> list[datetime]:
    """The wall-clock minutes strictly between two readings (what a jump skipped)."""
    count = (after - before) // timedelta(minutes=1)
    return [before + timedelta(minutes=n) for n in range(1, count)]


# -- zones and start instants ----------------------------------------------------------------


@functools.cache
def transitions(zone: str) -> tuple[datetime, ...]:
    """The instants in 2020-2030 at which ``zone``'s UTC offset changes."""
    tz = ZoneInfo(zone)
    found: list[datetime] = []
    day = datetime(YEARS.start, 1, 1, tzinfo=UTC)
    end = datetime(YEARS.stop, 1, 1, tzinfo=UTC)
    offset = day.astimezone(tz).utcoffset()
    while day < end:
        following = day + timedelta(days=1)
        next_offset = following.astimezone(tz).utcoffset()
        if next_offset != offset:
            found.append(_bisect_change(day, following, tz))
        day, offset = following, next_offset
    return tuple(found)


def _bisect_change(before: datetime, after: datetime, tz: ZoneInfo) -> datetime:
    offset = before.astimezone(tz).utcoffset()
    while after - before > timedelta(seconds=1):
        middle = before + (after - before) / 2
        middle = middle.replace(microsecond=0)
        if middle.astimezone(tz).utcoffset() == offset:
            before = middle
        else:
            after = middle
    return after


def starts_before(transition: datetime, rng: random.Random) -> list[datetime]:
    """Start instants just before a transition: a minute, a few hours, about a day."""
    return [
        transition - timedelta(minutes=1),
        transition - timedelta(minutes=rng.randrange(2, 6 * 60)),
        transition - timedelta(hours=rng.randrange(20, 30), seconds=rng.randrange(3600)),
    ]


def random_instant(rng: random.Random) -> datetime:
    """An instant in 2020-2030, to the second."""
    first = datetime(YEARS.start, 1, 1, tzinfo=UTC)
    span = datetime(YEARS.stop, 1, 1, tzinfo=UTC) - first
    return first + timedelta(seconds=rng.randrange(int(span.total_seconds())))


# -- random Vixie expressions ----------------------------------------------------------------

MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def random_expression(rng: random.Random) -> str:
    """A valid Vixie expression, biased to fixed times in 00:00-04:00 and stepped day fields."""
    if rng.random() < 0.04:
        return rng.choice(list(SHORTCUTS))
    return " ".join(
        (
            _minute(rng),
            _hour(rng),
            _day_of_month(rng),
            _month(rng),
            _day_of_week(rng),
        )
    )


def _minute(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.45, lambda: str(rng.choice((0, 15, 30, 45, rng.randrange(60))))),
        (0.15, lambda: _list(rng, 0, 59)),
        (0.10, lambda: _stepped_range(rng, 0, 59)),
        (0.15, lambda: f"*/{rng.choice((5, 10, 15, 20, 30, rng.randrange(1, 61)))}"),
        (0.15, lambda: "*"),
    )


def _hour(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.45, lambda: str(rng.randrange(0, 5))),
        (0.15, lambda: ",".join(map(str, sorted(rng.sample(range(0, 5), rng.randrange(2, 4)))))),
        (0.10, lambda: f"{rng.randrange(0, 3)}-{rng.randrange(3, 5)}"),
        (0.05, lambda: _stepped_range(rng, 0, 23)),
        (0.10, lambda: f"*/{rng.randrange(1, 8)}"),
        (0.10, lambda: "*"),
        (0.05, lambda: str(rng.randrange(24))),
    )


def _day_of_month(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.35, lambda: "*"),
        (0.25, lambda: f"*/{rng.randrange(2, 16)}"),
        (0.10, lambda: _stepped_range(rng, 1, 31)),
        (0.15, lambda: _list(rng, 1, 31)),
        (0.15, lambda: str(rng.randrange(1, 32))),
    )


def _month(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.70, lambda: "*"),
        (0.10, lambda: ",".join(_case(rng, m) for m in sorted(rng.sample(MONTH_NAMES, 2)))),
        (0.10, lambda: f"{_case(rng, MONTH_NAMES[rng.randrange(6)])}-{rng.randrange(7, 13)}"),
        (0.10, lambda: f"*/{rng.randrange(2, 7)}"),
    )


def _day_of_week(rng: random.Random) -> str:
    return _pick(
        rng,
        (0.45, lambda: "*"),
        (0.20, lambda: f"*/{rng.randrange(2, 5)}"),
        (0.05, lambda: f"{_case(rng, 'mon')}-{_case(rng, 'fri')}"),
        (0.05, lambda: f"{rng.randrange(0, 4)}-{rng.randrange(4, 8)}"),
        (0.05, lambda: _stepped_range(rng, 0, 7)),
        (0.15, lambda: ",".join(_day_names(rng))),
        (0.05, lambda: "7"),
    )


def _day_names(rng: random.Random) -> list[str]:
    days = sorted(rng.sample(range(8), rng.randrange(1, 4)))
    return [_case(rng, DAY_NAMES[d % 7]) if rng.random() < 0.5 else str(d) for d in days]


def _list(rng: random.Random, low: int, high: int) -> str:
    """A list mixing numbers, ranges and stepped ranges, e.g. ``1,5-9,20-40/7``."""
    items = []
    for _ in range(rng.randrange(2, 4)):
        first = rng.randrange(low, high + 1)
        kind = rng.random()
        if kind < 0.5:
            items.append(str(first))
        else:
            last = rng.randrange(first, high + 1)
            step = f"/{rng.randrange(2, 8)}" if kind < 0.75 else ""
            items.append(f"{first}-{last}{step}")
    return ",".join(items)


def _stepped_range(rng: random.Random, low: int, high: int) -> str:
    first = rng.randrange(low, high + 1)
    last = rng.randrange(first, high + 1)
    return f"{first}-{last}/{rng.randrange(1, max(2, (high - low) // 2))}"


def _case(rng: random.Random, name: str) -> str:
    return rng.choice((name, name.upper(), name.title()))


def _pick(rng: random.Random, *choices: tuple[float, Callable[[], str]]) -> str:
    roll = rng.random()
    for weight, make in choices:
        if roll < weight:
            return make()
        roll -= weight
    return choices[-1][1]()


# -- one case --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    expr: str
    zone: str
    start: datetime

    def __str__(self) -> str:
        return f"{self.expr!r} in {self.zone} after {self.start:%Y-%m-%dT%H:%M:%SZ}"


@dataclass(frozen=True)
class Finding:
    """What one case showed, when not every voice agreed."""

    case: Case
    kind: str  # see compare_case
    pgbeat: tuple[datetime, ...]
    other: tuple[datetime, ...]
    voice: str  # whose fires ``other`` are

    @property
    def is_mismatch(self) -> bool:
        """pgbeat broke a rule (not a documented mistake of another evaluator)."""
        return not self.kind.startswith("cronsim-")

    def __str__(self) -> str:
        return (
            f"{self.kind}: {self.case}\n"
            f"  pgbeat:  {_show(self.pgbeat)}\n  {self.voice}: {_show(self.other)}"
        )


def compare_case(case: Case, brute_force: bool = True) -> list[Finding]:
    """Run one case through every voice; what they did not agree on (nothing: all agree).

    Kinds: ``refused`` (pgbeat rejects what cronsim runs); ``accepted`` (pgbeat runs what
    cronsim rejects as never firing); ``brute-force/...`` (pgbeat and
    the brute force differ in the window after the start); ``cronsim/...`` (cronsim and
    the brute force both differ from pgbeat); ``cronsim-NAME`` (cronsim alone differs,
    the brute force sides with pgbeat, and the case is one of cronsim's documented
    deviations from Debian, see ``known_cronsim_deviation``); ``unexplained/...`` (cronsim
    alone differs in a way no documented deviation covers: needs a human).
    """
    try:
        mine = pgbeat_next(case.expr, case.zone, case.start, FIRES)
    except ValueError as error:
        reason = next(line for line in str(error).splitlines() if "cron" in line)
        return _refusal(case, reason.strip())
    findings = []
    try:
        other = cronsim_next(case.expr, case.zone, case.start, FIRES)
    except CronSimError as error:  # an expression that can never fire, by Debian's day rule
        return [Finding(case, f"accepted ({error})", tuple(mine), (), "cronsim")]
    # Fewer cronsim fires only when it gave up: no match within its 50-year horizon.
    if other != mine[: len(other)]:
        findings.append(_arbitrate(case, mine, other))
    if brute_force:
        end = case.start + WINDOW
        in_window = pgbeat_between(case.expr, case.zone, case.start, end)
        theirs = brute_force_between(case.expr, case.zone, case.start, end)
        if in_window != theirs:
            kind = f"brute-force/{_difference(case, in_window, theirs)}"
            findings.append(Finding(case, kind, tuple(in_window), tuple(theirs), "brute-force"))
    return findings


def _arbitrate(case: Case, mine: list[datetime], other: list[datetime]) -> Finding:
    """cronsim differs from pgbeat: let the brute force judge the stretch where it does."""
    first = min(set(mine[: len(other)]) ^ set(other))
    low, high = max(case.start, first - timedelta(days=1)), first + timedelta(minutes=1)
    judged = brute_force_between(case.expr, case.zone, low, high)
    if judged != pgbeat_between(case.expr, case.zone, low, high):
        kind = f"cronsim/{_difference(case, mine, other)}"
    else:
        deviation = known_cronsim_deviation(case, first)
        kind = deviation or f"unexplained/{_difference(case, mine, other)}"
    return Finding(case, kind, tuple(mine), tuple(other), "cronsim")


# cronsim reads a one-value range with a step ("5-5/10") as "5/10", i.e. 5, 15, 25...
_ONE_VALUE_STEP = re.compile(r"(?:^|[ ,])([0-9a-z]+)-\1/[0-9]+")


def known_cronsim_deviation(case: Case, first_difference: datetime) -> str | None:
    """The documented cronsim deviation (docs/cron.md) that explains a case, if one does."""
    if _ONE_VALUE_STEP.search(case.expr.lower()):
        return "cronsim-one-value-step"
    if fields_of(case.expr).fixed_time:
        return None  # cronsim walks fixed-time jobs on the naive wall clock: no known issue
    tz = ZoneInfo(case.zone)
    for change in transitions(case.zone):
        if not case.start < change <= first_difference + timedelta(minutes=1):
            continue
        before, after = _offsets(change, tz)
        old_wall = _wall(change - timedelta(seconds=1), tz) + timedelta(minutes=1)
        new_wall = _wall(change, tz)
        if old_wall.minute or new_wall.minute:
            return "cronsim-off-hour-transition"  # Lord_Howe's 30-minute shift, Chatham's :45
        gap_at_midnight = old_wall.date() < new_wall.date() or old_wall.hour == 0
        if after > before and gap_at_midnight and first_difference - change < timedelta(days=1):
            return "cronsim-midnight-gap"
    return None


def _offsets(change: datetime, tz: ZoneInfo) -> tuple[timedelta, timedelta]:
    before = (change - timedelta(seconds=1)).astimezone(tz).utcoffset()
    after = change.astimezone(tz).utcoffset()
    assert before is not None and after is not None
    return before, after


def _refusal(case: Case, reason: str) -> list[Finding]:
    """pgbeat refused the expression: a mismatch unless cronsim refuses it too."""
    try:
        other = cronsim_next(case.expr, case.zone, case.start, FIRES)
    except CronSimError:
        return []  # both refuse it (an expression that never fires)
    return [Finding(case, f"refused ({reason})", (), tuple(other), "cronsim")]


def _difference(case: Case, mine: list[datetime], theirs: list[datetime]) -> str:
    """ "dst" or "calendar" (is the first difference near a transition), "extra" or "missing"."""
    extra = sorted(set(mine) - set(theirs))
    missing = sorted(set(theirs) - set(mine))
    first = min(extra[:1] + missing[:1])
    near = any(abs(change - first) <= NEAR_TRANSITION for change in transitions(case.zone))
    side = "extra" if extra and extra[0] == first else "missing"
    return f"{'dst' if near else 'calendar'}/{side}"


def _show(fires: tuple[datetime, ...], limit: int = 8) -> str:
    shown = ", ".join(f"{fire:%Y-%m-%d %H:%M}Z" for fire in fires[:limit]) or "(none)"
    return shown if len(fires) <= limit else f"{shown}, ... ({len(fires)} in all)"


def cases(rng: random.Random, per_transition: int, random_starts: int) -> Iterator[Case]:
    """Every zone: starts just before each 2020-2030 transition, then random instants."""
    for zone in ZONES:
        for change in transitions(zone):
            for n in range(per_transition):
                start = starts_before(change, rng)[n % 3]
                yield Case(random_expression(rng), zone, start)
        for _ in range(random_starts):
            yield Case(random_expression(rng), zone, random_instant(rng))
