"""Cron syntax and day matching as Debian's cron has them (``pgbeat.scheduling.cron``).

What Debian accepts was checked with Debian 12's own ``crontab -n`` (cron 3.0pl1-162);
expected dates are worked out from the calendar by hand (1 January 2026 is a Thursday).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from pgbeat.scheduling.cron import CronExpression, normalise, parse_cron


def wall(text: str) -> datetime:
    """A naive wall-clock time from 'YYYY-MM-DD HH:MM'."""
    return datetime.fromisoformat(text)


def next_matches(expr: str, after: str, count: int) -> list[str]:
    expression, fires, at = parse_cron(expr), [], wall(after)
    for _ in range(count):
        at = expression.next_match(at)
        fires.append(f"{at:%Y-%m-%d %H:%M}")
    return fires


# -- the day rule -----------------------------------------------------------------------------

# (expression, after (exclusive), the next matches). crontab(5) on Debian: when either day
# field begins with "*" (also "*/2"), a day must match both fields, otherwise either.
# fmt: off
DAY_RULE = [
    pytest.param(
        "11 2 */10 * 3-4", "2026-01-01 00:00",
        # days 1, 11, 21, 31 that are a Wednesday or a Thursday
        ["2026-01-01 02:11",  # Thu 1
         "2026-01-21 02:11",  # Wed 21 (Sun 11, Sat 31 are not)
         "2026-02-11 02:11",  # Wed 11 (Sun 1, Sat 21 are not)
         "2026-03-11 02:11",  # Wed 11 (Sun 1, Sat 21, Tue 31 are not)
         "2026-04-01 02:11",  # Wed 1
         "2026-05-21 02:11"],  # Thu 21 (Fri 1, Mon 11, Sun 31 are not)
        id="issue-11-2-every-10th-day-and-wed-thu",
    ),
    pytest.param(
        "47 * 19 * */2", "2026-01-01 00:00",
        # the 19th when it is a Sunday, Tuesday, Thursday or Saturday: not Mon 19 January
        ["2026-02-19 00:47", "2026-02-19 01:47", "2026-02-19 02:47"],  # Thu 19 February
        id="issue-47-hourly-on-the-19th-if-sun-tue-thu-sat",
    ),
    pytest.param(
        "47 * 19 * */2", "2026-02-19 23:00",
        ["2026-02-19 23:47", "2026-03-19 00:47"],  # Thu 19 March; never on other Thursdays
        id="issue-47-next-month",
    ),
    pytest.param(
        "0 0 */7 4,9 3,6", "2026-01-01 00:00",
        # days 1, 8, 15, 22, 29 of April and September that are a Wednesday or Saturday:
        # April 2026 starts on a Wednesday, September 2026 on a Tuesday, April 2027 on a
        # Thursday, September 2027 on a Wednesday.
        ["2026-04-01 00:00", "2026-04-08 00:00", "2026-04-15 00:00", "2026-04-22 00:00",
         "2026-04-29 00:00", "2027-09-01 00:00", "2027-09-08 00:00"],
        id="issue-0-0-every-7th-day-april-september-and-wed-sat",
    ),
    pytest.param(
        "29 0-12 4,30 * */2", "2026-01-04 12:00",
        # the 4th and 30th when Sun/Tue/Thu/Sat: Sun 4 January, then Sat 4 April (Fri 30
        # January, Wed 4 February, Wed 4 and Mon 30 March do not match)
        ["2026-01-04 12:29", "2026-04-04 00:29", "2026-04-04 01:29"],
        id="issue-29-0-12-on-4th-30th-if-sun-tue-thu-sat",
    ),
    pytest.param(
        "30 4 1,15 * 5", "2026-01-01 00:00",
        # crontab(5)'s own example: neither field begins with "*": the 1st, the 15th and
        # every Friday
        ["2026-01-01 04:30", "2026-01-02 04:30", "2026-01-09 04:30", "2026-01-15 04:30",
         "2026-01-16 04:30", "2026-01-23 04:30"],
        id="crontab5-1st-15th-or-friday",
    ),
    pytest.param(
        "0 0 1 * */7", "2026-01-01 00:00",
        # */7 in day-of-week is 0 and 7: Sunday. The 1st when it is a Sunday.
        ["2026-02-01 00:00", "2026-03-01 00:00", "2026-11-01 00:00"],
        id="first-of-month-if-sunday",
    ),
    pytest.param(
        "0 0 * * mon", "2026-01-01 00:00",
        ["2026-01-05 00:00", "2026-01-12 00:00"],  # day-of-month "*": Mondays only
        id="star-day-of-month-means-weekday-only",
    ),
    pytest.param(
        "0 0 1,* * mon", "2026-01-01 00:00",
        # "1,*" does not begin with "*": either field matches, and "1,*" is every day
        ["2026-01-02 00:00", "2026-01-03 00:00"],
        id="star-inside-a-list-is-not-a-leading-star",
    ),
    pytest.param(
        "0 0 31 2 mon", "2026-01-01 00:00",
        ["2026-02-02 00:00", "2026-02-09 00:00"],  # no 31 February, but every Monday in it
        id="impossible-day-or-weekday-fires-on-the-weekday",
    ),
    pytest.param(
        "0 12 29 2 */5", "2026-01-01 00:00",
        # 29 February on a Sunday or a Friday: 2032 is a Sunday, 2036 a Friday
        ["2032-02-29 12:00", "2036-02-29 12:00"],
        id="leap-day-on-a-weekday-years-away",
    ),
]
# fmt: on


@pytest.mark.parametrize(("expr", "after", "expected"), DAY_RULE)
def test_day_rule(expr: str, after: str, expected: list[str]) -> None:
    assert next_matches(expr, after, len(expected)) == expected


# -- what is accepted, and what it means -------------------------------------------------------

EVERY_MINUTE = frozenset(range(60))
EVERY_DAY = frozenset(range(7))

# (expression, field, expected values)
# fmt: off
MEANINGS = [
    ("1,5-9,20-40/7 * * * *", "minutes", {1, 5, 6, 7, 8, 9, 20, 27, 34}),
    ("*/20 * * * *", "minutes", {0, 20, 40}),
    ("10-40/15 * * * *", "minutes", {10, 25, 40}),
    ("*/60 * * * *", "minutes", {0}),  # a step past the end keeps the first value (Debian)
    ("*/1000 * * * *", "minutes", {0}),
    ("007 * * * *", "minutes", {7}),  # leading zeros: Debian reads the number
    ("* 1,* * * *", "hours", set(range(24))),
    ("0 0-23/6 * * *", "hours", {0, 6, 12, 18}),
    ("0 0 */10 * *", "days", {1, 11, 21, 31}),
    ("0 0 */7 * *", "days", {1, 8, 15, 22, 29}),
    ("0 0 * */5 *", "months", {1, 6, 11}),
    ("0 0 * JAN-MAR *", "months", {1, 2, 3}),
    ("0 0 * jan,Jul,DEC *", "months", {1, 7, 12}),
    ("0 0 * jan-dec/3 *", "months", {1, 4, 7, 10}),
    ("0 0 * feb-6 *", "months", {2, 3, 4, 5, 6}),  # names and numbers mix
    ("0 0 * * MON-FRI", "weekdays", {1, 2, 3, 4, 5}),
    ("0 0 * * mon-fri/2", "weekdays", {1, 3, 5}),
    ("0 0 * * sun-sat/2", "weekdays", {0, 2, 4, 6}),
    ("0 0 * * 7", "weekdays", {0}),  # 7 is Sunday
    ("0 0 * * 5-7", "weekdays", {5, 6, 0}),
    ("0 0 * * 0-7", "weekdays", EVERY_DAY),
    ("0 0 * * sun-7", "weekdays", EVERY_DAY),
    ("0 0 * * */2", "weekdays", {0, 2, 4, 6}),
    ("0 0 * * */3", "weekdays", {0, 3, 6}),
    ("0 0 * * 1-7/3", "weekdays", {1, 4, 0}),  # 7 reached by the step is Sunday too
    ("0 0 * * Sat,sUn,3", "weekdays", {6, 0, 3}),
]
# fmt: on


@pytest.mark.parametrize(("expr", "field", "expected"), MEANINGS)
def test_accepted_syntax_means_what_debian_means(expr: str, field: str, expected: set[int]) -> None:
    assert getattr(parse_cron(expr), field) == expected


# fmt: off
SHORTCUTS = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
]
# fmt: on


@pytest.mark.parametrize(("shortcut", "fields"), SHORTCUTS)
def test_shortcuts_are_debians_five_fields(shortcut: str, fields: str) -> None:
    assert parse_cron(shortcut) == parse_cron(fields)


def test_whitespace_and_case_are_normalised() -> None:
    assert normalise(" 0\t0  * *   MON-FRI ") == "0 0 * * mon-fri"
    assert normalise(" @daily ") == "@daily"
    assert normalise("@Daily") == "@daily"  # an extension: Debian reads only "@daily"
    assert parse_cron("0 0 * Jan Mon") == parse_cron("0 0 * 1 1")


# (expression, fixed-time?) Debian: a job is fixed-time when neither its minute nor its
# hour field begins with "*"; a "*" later in the field does not count.
# fmt: off
FIXED_TIME = [
    ("30 2 * * *", True),
    ("0,30 1-3 * * 1-5", True),
    ("0 0-23 * * *", True),
    ("0 1,*/2 * * *", True),
    ("5,*/15 2 * * *", True),
    ("0 */2 * * *", False),
    ("*/15 2 * * *", False),
    ("* 2 * * *", False),
    ("0 * * * *", False),
    ("@hourly", False),
    ("@daily", True),
    ("@midnight", True),
    ("@weekly", True),
    ("@monthly", True),
    ("@yearly", True),
    ("@annually", True),
]
# fmt: on


@pytest.mark.parametrize(("expr", "fixed"), FIXED_TIME)
def test_fixed_time_is_debians_leading_star_rule(expr: str, fixed: bool) -> None:
    assert parse_cron(expr).fixed_time is fixed


# -- what is rejected, in one line that says why ----------------------------------------------

# (expression, part of the reason). Rows marked "Debian accepts" are accepted by Debian's
# crontab with a meaning nobody intends (see docs/cron.md); all others Debian rejects too.
# fmt: off
REJECTED = [
    ("@reboot", "@reboot is not a period"),
    ("@fortnightly", "unknown shortcut"),
    ("@daily 5", "stands alone"),  # Debian accepts: "5" would be the command
    ("0 0 L * *", "no L, W, #, ? or H"),
    ("0 0 LW * *", "no L, W, #, ? or H"),
    ("0 0 15W * *", "no L, W, #, ? or H"),
    ("0 0 * * 5L", "no L, W, #, ? or H"),
    ("0 0 * * 5#2", "no L, W, #, ? or H"),  # Debian accepts: it reads "5" and drops "#2"
    ("0 0 ? * *", "no L, W, #, ? or H"),
    ("H * * * *", "no L, W, #, ? or H"),
    ("0 0 0 * * *", "got 6 (there is no seconds or year field)"),
    ("0 0 * * * 2026", "got 6"),
    ("0 0 * *", "got 4"),
    ("", "got 0"),
    ("*/0 * * * *", "step 0 must be between 1"),
    ("0-59/0 * * * *", "step 0 must be between 1"),
    ("*/2147483648 * * * *", "step 2147483648 must be between 1"),
    ("60 * * * *", "minute 60 is out of range 0-59"),
    ("-1 * * * *", "not a value, range or step"),
    ("0 24 * * *", "hour 24 is out of range 0-23"),
    ("0 0 0 * *", "day-of-month 0 is out of range 1-31"),
    ("0 0 32 * *", "day-of-month 32 is out of range 1-31"),
    ("0 0 * 0 *", "month 0 is out of range 1-12"),
    ("0 0 * 13 *", "month 13 is out of range 1-12"),
    ("0 0 * * 8", "day-of-week 8 is out of range 0-7"),
    ("50-70/30 * * * *", "minute 70 is out of range 0-59"),
    ("5-3 * * * *", "range 5-3 runs backwards"),  # Debian accepts: it would never run
    ("0 0 * * sat-sun", "range sat-sun runs backwards"),  # Debian accepts: never runs
    ("0 0 * * 7-1", "range 7-1 runs backwards"),  # Debian accepts: never runs
    ("0 0 * dec-jan *", "range dec-jan runs backwards"),  # Debian accepts: never runs
    ("5/2 * * * *", "a step needs a range or *"),
    ("0 0 * * mon/2", "a step needs a range or *"),
    ("*/mon * * * *", "not a value, range or step"),
    ("0 0 * * */mon", "not a value, range or step"),
    ("jan * * * *", "minute 'jan' is not a number"),
    ("0 0 * mon *", "month 'mon' is not a number or a name (jan-dec)"),
    ("0 0 * * monday", "day-of-week 'monday' is not a number or a name (sun-sat)"),
    ("0 0 * january *", "month 'january' is not a number or a name"),
    ("1,,2 * * * *", "not a value, range or step"),
    (",1 * * * *", "not a value, range or step"),
    ("1, * * * *", "not a value, range or step"),
    ("*-5 * * * *", "not a value, range or step"),  # Debian accepts: reads "*", drops "-5"
    ("*/5/2 * * * *", "not a value, range or step"),  # Debian accepts: drops "/2"
    ("1-5-7 * * * *", "not a value, range or step"),  # Debian accepts: drops "-7"
    ("0x1 * * * *", "minute '0x1' is not a number"),
    ("+1 * * * *", "not a value, range or step"),
    ("1.5 * * * *", "not a value, range or step"),
    ("٣ * * * *", "not a value, range or step"),
    ("0 0 30 2 *", "never fires: feb has no day 30"),  # Debian accepts: never runs
    ("0 0 31 4,6,9,11 *", "never fires: apr, jun, sep, nov have no day 31"),
    ("0 0 30,31 2 */2", "never fires: feb has no day 30, 31"),
]
# fmt: on


@pytest.mark.parametrize(("expr", "reason"), REJECTED)
def test_rejected_with_one_line_reason(expr: str, reason: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_cron(expr)
    message = str(caught.value)
    assert reason in message
    assert "\n" not in message


def test_parsed_expressions_are_shared_values() -> None:
    expression = parse_cron("0 0 * * mon-fri")
    assert isinstance(expression, CronExpression)
    assert expression == parse_cron("0 0 * * MON-FRI")
    assert hash(expression) == hash(parse_cron("0 0 * * 1-5"))


# -- next_match -----------------------------------------------------------------------------


def test_next_match_is_strictly_after_and_ignores_seconds() -> None:
    expression = parse_cron("30 2 * * *")
    assert expression.next_match(wall("2026-03-29 02:30")) == wall("2026-03-30 02:30")
    assert expression.next_match(wall("2026-03-29 02:29:59")) == wall("2026-03-29 02:30")


def test_next_match_skips_months_without_the_day() -> None:
    assert next_matches("0 0 31 * *", "2026-01-31 00:00", 3) == [
        "2026-03-31 00:00",
        "2026-05-31 00:00",
        "2026-07-31 00:00",
    ]


def test_next_match_across_a_year_end() -> None:
    assert next_matches("59 23 31 12 *", "2026-06-01 00:00", 2) == [
        "2026-12-31 23:59",
        "2027-12-31 23:59",
    ]


def test_feb_29_skips_2100() -> None:
    assert next_matches("0 0 29 2 *", "2096-03-01 00:00", 2) == [
        "2104-02-29 00:00",
        "2108-02-29 00:00",
    ]


def test_matches_reads_the_wall_clock_minute() -> None:
    expression = parse_cron("*/15 9-17 * * mon-fri")
    assert expression.matches(wall("2026-01-05 09:45"))  # a Monday
    assert not expression.matches(wall("2026-01-04 09:45"))  # a Sunday
    assert not expression.matches(wall("2026-01-05 09:46"))
