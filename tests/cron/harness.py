"""Differential testing of pgbeat's cron fire times against two other voices.

- cronsim (PyPI, by another author): a cron evaluator that models Debian's cron, its day
  rule and its DST handling;
- a brute-force model: walk every UTC minute, read the wall clock, apply crontab(5) and
  Debian's DST rules literally (nothing of pgbeat's or cronsim's search code).

``compare_case`` runs one case (an expression from expressions.py, a zone and a start
from zones.py) and says how the voices disagree, if they do. Pure: no clock is read.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from pgbeat.scheduling.fires import fire_times_after, fire_times_between
from pgbeat.scheduling.schedule import Schedule
from tests.cron.brute_force import brute_force_between, fields_of, wall_clock
from tests.cron.expressions import SHORTCUTS, random_expression
from tests.cron.zones import ZONES, random_instant, starts_before, transitions

FIRES = 6  # the next N fire instants compared with cronsim
WINDOW = timedelta(hours=36)  # the stretch after the start compared with the brute force
NEAR_TRANSITION = timedelta(hours=3)

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
        lines = str(error).splitlines()
        reason = next((line for line in lines if "bad cron" in line), lines[-1])
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
        old_wall = wall_clock(change - timedelta(seconds=1), tz) + timedelta(minutes=1)
        new_wall = wall_clock(change, tz)
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
