"""Fire times and the DST policy of ``pgbeat.schedule``.

Expected instants are worked out by hand from each zone's rules (noted beside each
row as local wall time), never produced by the code under test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from freezegun import freeze_time
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from pgbeat.scheduling.fires import fire_times_after, fire_times_between, next_fire_after
from pgbeat.scheduling.schedule import Schedule, is_schedule_name, unique_key, validate_cron


def at(text: str) -> datetime:
    """An aware UTC instant from 'YYYY-MM-DD HH:MM[:SS]'."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def cron(expr: str, timezone: str = "UTC", name: str = "job") -> Schedule:
    return Schedule(name=name, kind=name, cron=expr, timezone=timezone)


def every(duration: str, timezone: str = "UTC") -> Schedule:
    return Schedule.model_validate(
        {"name": "tick", "kind": "tick", "every": duration, "timezone": timezone}
    )


# (zone, expression, start (exclusive), end (inclusive), expected UTC fires)
# fmt: off
CASES = [
    # Europe/Berlin: CET +1 / CEST +2. 2026-03-29 02:00 -> 03:00 at 01:00Z;
    # 2026-10-25 03:00 -> 02:00 at 01:00Z (02:00-03:00 happens twice).
    pytest.param(
        "Europe/Berlin", "30 2 * * *", "2026-03-27 12:00", "2026-03-30 12:00",
        ["2026-03-28 01:30",  # 02:30 CET
         "2026-03-29 01:00",  # 02:30 does not exist: 03:00 CEST, the end of the gap
         "2026-03-30 00:30"],  # 02:30 CEST
        id="berlin-spring-fixed-0230",
    ),
    pytest.param(
        "Europe/Berlin", "30 2 * * *", "2026-10-24 12:00", "2026-10-26 12:00",
        ["2026-10-25 00:30",  # 02:30 CEST, first pass only (not 01:30Z, 02:30 CET)
         "2026-10-26 01:30"],  # 02:30 CET
        id="berlin-fall-fixed-0230-once",
    ),
    pytest.param(
        "Europe/Berlin", "0 2 * * *", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-29 01:00"],  # 02:00 skipped -> 03:00 CEST
        id="berlin-spring-fixed-0200",
    ),
    pytest.param(
        "Europe/Berlin", "0 2 * * *", "2026-10-24 12:00", "2026-10-25 12:00",
        ["2026-10-25 00:00"],  # 02:00 CEST only
        id="berlin-fall-fixed-0200",
    ),
    pytest.param(
        "Europe/Berlin", "0,30 2 * * *", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-29 01:00"],  # 02:00 and 02:30 both land on 03:00 CEST: one fire
        id="berlin-spring-two-gap-times-one-fire",
    ),
    pytest.param(
        "Europe/Berlin", "0 2,3 * * *", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-29 01:00"],  # gap 02:00 -> 03:00 CEST collides with the real 03:00
        id="berlin-spring-gap-collides-with-regular",
    ),
    pytest.param(
        "Europe/Berlin", "30 2,3 * * *", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-29 01:00",  # 02:30 -> 03:00 CEST
         "2026-03-29 01:30"],  # 03:30 CEST
        id="berlin-spring-gap-and-regular",
    ),
    pytest.param(
        "Europe/Berlin", "0 * * * *", "2026-03-28 22:30", "2026-03-29 02:30",
        ["2026-03-28 23:00",  # 00:00 CET
         "2026-03-29 00:00",  # 01:00 CET
         "2026-03-29 01:00",  # 03:00 CEST (there is no 02:00)
         "2026-03-29 02:00"],  # 04:00 CEST
        id="berlin-spring-hourly",
    ),
    pytest.param(
        "Europe/Berlin", "0 * * * *", "2026-10-24 22:30", "2026-10-25 02:30",
        ["2026-10-24 23:00",  # 01:00 CEST
         "2026-10-25 00:00",  # 02:00 CEST
         "2026-10-25 01:00",  # 02:00 CET: the second 02:00 runs too
         "2026-10-25 02:00"],  # 03:00 CET
        id="berlin-fall-hourly-both-0200",
    ),
    pytest.param(
        "Europe/Berlin", "*/15 * * * *", "2026-10-24 23:50", "2026-10-25 01:50",
        ["2026-10-25 00:00", "2026-10-25 00:15", "2026-10-25 00:30", "2026-10-25 00:45",
         "2026-10-25 01:00", "2026-10-25 01:15", "2026-10-25 01:30", "2026-10-25 01:45"],
        id="berlin-fall-quarter-hourly-8-in-repeated-hour",  # 02:00-02:45 CEST, then CET
    ),
    pytest.param(
        "Europe/Berlin", "*/15 * * * *", "2026-10-24 23:50", "2026-10-25 00:20",
        ["2026-10-25 00:00", "2026-10-25 00:15"],  # 02:00, 02:15 CEST; CET pass is later
        id="berlin-fall-window-ends-in-first-pass",
    ),
    pytest.param(
        "Europe/Berlin", "*/15 * * * *", "2026-03-29 00:40", "2026-03-29 01:20",
        ["2026-03-29 00:45",  # 01:45 CET
         "2026-03-29 01:00",  # 03:00 CEST
         "2026-03-29 01:15"],  # 03:15 CEST
        id="berlin-spring-quarter-hourly",
    ),
    pytest.param(
        "Europe/Berlin", "*/15 2 * * *", "2026-03-28 12:00", "2026-03-29 12:00",
        [],  # wildcard minute: follows the wall clock, which has no 02:xx that night
        id="berlin-spring-wildcard-minute-skipped",
    ),
    pytest.param(
        "Europe/Berlin", "*/15 2 * * *", "2026-10-24 12:00", "2026-10-25 12:00",
        ["2026-10-25 00:00", "2026-10-25 00:15", "2026-10-25 00:30", "2026-10-25 00:45",
         "2026-10-25 01:00", "2026-10-25 01:15", "2026-10-25 01:30", "2026-10-25 01:45"],
        id="berlin-fall-wildcard-minute-both-passes",
    ),
    pytest.param(
        "Europe/Berlin", "30 * * * *", "2026-03-29 00:00", "2026-03-29 02:00",
        ["2026-03-29 00:30",  # 01:30 CET
         "2026-03-29 01:30"],  # 03:30 CEST (02:30 skipped)
        id="berlin-spring-half-past-hourly",
    ),
    pytest.param(
        "Europe/Berlin", "@daily", "2026-03-28 12:00", "2026-03-30 12:00",
        ["2026-03-28 23:00",  # 29th 00:00 CET
         "2026-03-29 22:00"],  # 30th 00:00 CEST
        id="berlin-daily-across-spring",
    ),
    # Europe/London: GMT +0 / BST +1. 2026-03-29 01:00 -> 02:00 at 01:00Z;
    # 2026-10-25 02:00 -> 01:00 at 01:00Z (01:00-02:00 twice).
    pytest.param(
        "Europe/London", "30 1 * * *", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-29 01:00"],  # 01:30 skipped -> 02:00 BST
        id="london-spring-fixed-0130",
    ),
    pytest.param(
        "Europe/London", "30 1 * * *", "2026-10-24 12:00", "2026-10-25 12:00",
        ["2026-10-25 00:30"],  # 01:30 BST only
        id="london-fall-fixed-0130-once",
    ),
    pytest.param(
        "Europe/London", "30 2 * * *", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-29 01:30"],  # 02:30 BST: not in the gap
        id="london-spring-0230-unaffected",
    ),
    pytest.param(
        "Europe/London", "0 * * * *", "2026-10-24 23:30", "2026-10-25 02:00",
        ["2026-10-25 00:00",  # 01:00 BST
         "2026-10-25 01:00",  # 01:00 GMT
         "2026-10-25 02:00"],  # 02:00 GMT
        id="london-fall-hourly",
    ),
    # America/New_York: EST -5 / EDT -4. 2026-03-08 02:00 -> 03:00 at 07:00Z;
    # 2026-11-01 02:00 -> 01:00 at 06:00Z (01:00-02:00 twice).
    pytest.param(
        "America/New_York", "30 2 * * *", "2026-03-07 00:00", "2026-03-10 00:00",
        ["2026-03-07 07:30",  # 02:30 EST
         "2026-03-08 07:00",  # 02:30 skipped -> 03:00 EDT
         "2026-03-09 06:30"],  # 02:30 EDT
        id="new-york-spring-fixed-0230",
    ),
    pytest.param(
        "America/New_York", "0 2 * * *", "2026-03-07 12:00", "2026-03-08 12:00",
        ["2026-03-08 07:00"],  # 02:00 skipped -> 03:00 EDT
        id="new-york-spring-fixed-0200",
    ),
    pytest.param(
        "America/New_York", "30 1 * * *", "2026-10-31 00:00", "2026-11-03 00:00",
        ["2026-10-31 05:30",  # 01:30 EDT
         "2026-11-01 05:30",  # 01:30 EDT, first pass only (not 06:30Z, 01:30 EST)
         "2026-11-02 06:30"],  # 01:30 EST
        id="new-york-fall-fixed-0130-once",
    ),
    pytest.param(
        "America/New_York", "30 2 * * *", "2026-10-31 12:00", "2026-11-01 12:00",
        ["2026-11-01 07:30"],  # 02:30 EST: not repeated
        id="new-york-fall-0230-unaffected",
    ),
    pytest.param(
        "America/New_York", "0 * * * *", "2026-11-01 04:30", "2026-11-01 07:00",
        ["2026-11-01 05:00",  # 01:00 EDT
         "2026-11-01 06:00",  # 01:00 EST
         "2026-11-01 07:00"],  # 02:00 EST
        id="new-york-fall-hourly",
    ),
    pytest.param(
        "America/New_York", "*/30 1 * * *", "2026-10-31 12:00", "2026-11-01 12:00",
        ["2026-11-01 05:00", "2026-11-01 05:30",  # 01:00, 01:30 EDT
         "2026-11-01 06:00", "2026-11-01 06:30"],  # 01:00, 01:30 EST
        id="new-york-fall-wildcard-minute-both-passes",
    ),
    # America/Sao_Paulo: -3, with DST (-2) until 2019. 2018-11-04 00:00 -> 01:00 at
    # 03:00Z; 2019-02-17 00:00 -> 2019-02-16 23:00 at 02:00Z; none since.
    pytest.param(
        "America/Sao_Paulo", "0 0 * * *", "2018-11-02 12:00", "2018-11-05 12:00",
        ["2018-11-03 03:00",  # 00:00 -03
         "2018-11-04 03:00",  # midnight skipped -> 01:00 -02
         "2018-11-05 02:00"],  # 00:00 -02
        id="sao-paulo-2018-spring-midnight",
    ),
    pytest.param(
        "America/Sao_Paulo", "0 * * * *", "2018-11-04 01:30", "2018-11-04 04:30",
        ["2018-11-04 02:00",  # 3rd 23:00 -03
         "2018-11-04 03:00",  # 01:00 -02 (no 00:00)
         "2018-11-04 04:00"],  # 02:00 -02
        id="sao-paulo-2018-spring-hourly",
    ),
    pytest.param(
        "America/Sao_Paulo", "30 23 * * *", "2019-02-16 12:00", "2019-02-17 12:00",
        ["2019-02-17 01:30"],  # 16th 23:30 -02, first pass only (not 02:30Z)
        id="sao-paulo-2019-fall-fixed-once",
    ),
    pytest.param(
        "America/Sao_Paulo", "0 0 * * *", "2019-11-02 12:00", "2019-11-04 12:00",
        ["2019-11-03 03:00", "2019-11-04 03:00"],  # no DST any more: -03 both days
        id="sao-paulo-2019-no-dst",
    ),
    pytest.param(
        "America/Sao_Paulo", "0 0 * * *", "2020-10-31 12:00", "2020-11-02 12:00",
        ["2020-11-01 03:00", "2020-11-02 03:00"],
        id="sao-paulo-2020-no-dst",
    ),
    pytest.param(
        "America/Sao_Paulo", "30 23 * * *", "2020-02-15 12:00", "2020-02-16 12:00",
        ["2020-02-16 02:30"],  # 15th 23:30 -03, once
        id="sao-paulo-2020-no-fall-back",
    ),
    # Australia/Sydney: AEST +10 / AEDT +11. Back 2026-04-05 03:00 -> 02:00 at
    # 2026-04-04 16:00Z; forward 2026-10-04 02:00 -> 03:00 at 2026-10-03 16:00Z.
    pytest.param(
        "Australia/Sydney", "30 2 * * *", "2026-10-02 00:00", "2026-10-05 00:00",
        ["2026-10-02 16:30",  # 3 Oct 02:30 AEST
         "2026-10-03 16:00",  # 4 Oct 02:30 skipped -> 03:00 AEDT
         "2026-10-04 15:30"],  # 5 Oct 02:30 AEDT
        id="sydney-spring-october-fixed",
    ),
    pytest.param(
        "Australia/Sydney", "30 2 * * *", "2026-04-03 00:00", "2026-04-06 00:00",
        ["2026-04-03 15:30",  # 4 Apr 02:30 AEDT
         "2026-04-04 15:30",  # 5 Apr 02:30 AEDT, first pass only
         "2026-04-05 16:30"],  # 6 Apr 02:30 AEST
        id="sydney-fall-april-fixed-once",
    ),
    pytest.param(
        "Australia/Sydney", "0 * * * *", "2026-04-04 14:30", "2026-04-04 17:00",
        ["2026-04-04 15:00",  # 02:00 AEDT
         "2026-04-04 16:00",  # 02:00 AEST
         "2026-04-04 17:00"],  # 03:00 AEST
        id="sydney-fall-hourly",
    ),
    # Australia/Lord_Howe: +10:30 / +11, a 30-minute shift. Forward 2026-10-04 02:00
    # -> 02:30 at 2026-10-03 15:30Z; back 2026-04-05 02:00 -> 01:30 at 2026-04-04 15:00Z.
    pytest.param(
        "Australia/Lord_Howe", "15 2 * * *", "2026-10-03 00:00", "2026-10-04 16:00",
        ["2026-10-03 15:30",  # 02:15 skipped -> 02:30 +11
         "2026-10-04 15:15"],  # 02:15 +11
        id="lord-howe-spring-fixed-0215",
    ),
    pytest.param(
        "Australia/Lord_Howe", "15,30 2 * * *", "2026-10-03 00:00", "2026-10-03 23:00",
        ["2026-10-03 15:30"],  # 02:15 (gap) and the real 02:30 are one instant
        id="lord-howe-spring-gap-collides",
    ),
    pytest.param(
        "Australia/Lord_Howe", "0 * * * *", "2026-10-03 14:00", "2026-10-03 17:00",
        ["2026-10-03 14:30",  # 01:00 +10:30
         "2026-10-03 16:00",  # 03:00 +11 (02:00 skipped: 90 minutes apart)
         "2026-10-03 17:00"],  # 04:00 +11
        id="lord-howe-spring-hourly",
    ),
    pytest.param(
        "Australia/Lord_Howe", "30 * * * *", "2026-10-03 14:00", "2026-10-03 17:00",
        ["2026-10-03 15:00",  # 01:30 +10:30 (00:30 = 14:00Z is the exclusive start)
         "2026-10-03 15:30",  # 02:30 +11, right after the gap
         "2026-10-03 16:30"],  # 03:30 +11
        id="lord-howe-spring-half-past",
    ),
    pytest.param(
        "Australia/Lord_Howe", "45 1 * * *", "2026-04-04 00:00", "2026-04-05 00:00",
        ["2026-04-04 14:45"],  # 01:45 +11 only (not 15:15Z, 01:45 +10:30)
        id="lord-howe-fall-fixed-once",
    ),
    pytest.param(
        "Australia/Lord_Howe", "*/15 * * * *", "2026-04-04 14:20", "2026-04-04 15:35",
        ["2026-04-04 14:30", "2026-04-04 14:45",  # 01:30, 01:45 +11
         "2026-04-04 15:00", "2026-04-04 15:15",  # 01:30, 01:45 +10:30
         "2026-04-04 15:30"],  # 02:00 +10:30
        id="lord-howe-fall-quarter-hourly",
    ),
    pytest.param(
        "Australia/Lord_Howe", "0 2 * * *", "2026-04-04 12:00", "2026-04-05 12:00",
        ["2026-04-04 15:30"],  # 02:00 is not repeated (01:30-02:00 is): +10:30
        id="lord-howe-fall-0200-once",
    ),
    # Asia/Kolkata +05:30 and Asia/Kathmandu +05:45: no DST.
    pytest.param(
        "Asia/Kolkata", "30 2 * * *", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-28 21:00"], id="kolkata-fixed",  # 29th 02:30 IST
    ),
    pytest.param(
        "Asia/Kolkata", "0 * * * *", "2026-03-29 00:00", "2026-03-29 02:00",
        ["2026-03-29 00:30", "2026-03-29 01:30"], id="kolkata-hourly",  # 06:00, 07:00 IST
    ),
    pytest.param(
        "Asia/Kolkata", "@daily", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-28 18:30"], id="kolkata-daily",  # 29th 00:00 IST
    ),
    pytest.param(
        "Asia/Kathmandu", "30 2 * * *", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-28 20:45"], id="kathmandu-fixed",  # 29th 02:30 +05:45
    ),
    pytest.param(
        "Asia/Kathmandu", "0 * * * *", "2026-03-29 00:00", "2026-03-29 02:00",
        ["2026-03-29 00:15", "2026-03-29 01:15"], id="kathmandu-hourly",  # 06:00, 07:00
    ),
    pytest.param(
        "Asia/Kathmandu", "@daily", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-28 18:15"], id="kathmandu-daily",
    ),
    # Pacific/Chatham: +12:45 / +13:45. Forward 2026-09-27 02:45 -> 03:45 at
    # 2026-09-26 14:00Z; back 2026-04-05 03:45 -> 02:45 at 2026-04-04 14:00Z.
    pytest.param(
        "Pacific/Chatham", "0 3 * * *", "2026-09-26 00:00", "2026-09-27 14:00",
        ["2026-09-26 14:00",  # 27th 03:00 skipped -> 03:45 +13:45
         "2026-09-27 13:15"],  # 28th 03:00 +13:45
        id="chatham-spring-fixed-0300",
    ),
    pytest.param(
        "Pacific/Chatham", "30 2 * * *", "2026-09-26 00:00", "2026-09-27 00:00",
        ["2026-09-26 13:45"],  # 02:30 +12:45, just before the gap
        id="chatham-spring-0230-before-gap",
    ),
    pytest.param(
        "Pacific/Chatham", "0 3 * * *", "2026-04-04 00:00", "2026-04-05 00:00",
        ["2026-04-04 13:15"],  # 03:00 +13:45 only (not 14:15Z, 03:00 +12:45)
        id="chatham-fall-fixed-once",
    ),
    pytest.param(
        "Pacific/Chatham", "0 * * * *", "2026-04-04 12:00", "2026-04-04 15:30",
        ["2026-04-04 12:15",  # 02:00 +13:45
         "2026-04-04 13:15",  # 03:00 +13:45
         "2026-04-04 14:15",  # 03:00 +12:45
         "2026-04-04 15:15"],  # 04:00 +12:45
        id="chatham-fall-hourly",
    ),
    # Europe/Amsterdam 1937-07-01 00:00 +1:19:32 -> 00:00:28 +1:20 at 1937-06-30
    # 22:40:28Z: a 28-second gap whose end is not on a whole minute.
    pytest.param(
        "Europe/Amsterdam", "0 0 * * *", "1937-06-30 12:00", "1937-07-01 12:00",
        ["1937-06-30 22:40:28"],  # midnight skipped -> 00:00:28 +1:20
        id="amsterdam-1937-seconds-gap-fixed",
    ),
    pytest.param(
        "Europe/Amsterdam", "0 * * * *", "1937-06-30 21:00", "1937-06-30 23:45",
        ["1937-06-30 21:40:28",  # 23:00 +1:19:32
         "1937-06-30 23:40"],  # 01:00 +1:20 (midnight skipped)
        id="amsterdam-1937-seconds-gap-wildcard",
    ),
    # UTC: no surprises.
    pytest.param(
        "UTC", "30 2 * * *", "2026-03-28 12:00", "2026-03-30 12:00",
        ["2026-03-29 02:30", "2026-03-30 02:30"], id="utc-fixed",
    ),
    pytest.param(
        "UTC", "*/15 * * * *", "2026-10-25 00:50", "2026-10-25 01:50",
        ["2026-10-25 01:00", "2026-10-25 01:15", "2026-10-25 01:30", "2026-10-25 01:45"],
        id="utc-quarter-hourly",
    ),
    # Days 29-31: a day a month lacks is simply not a fire in that month.
    pytest.param(
        "UTC", "0 0 31 * *", "2026-01-01 00:00", "2027-01-01 00:00",
        ["2026-01-31 00:00", "2026-03-31 00:00", "2026-05-31 00:00", "2026-07-31 00:00",
         "2026-08-31 00:00", "2026-10-31 00:00", "2026-12-31 00:00"],
        id="31st-only-long-months",
    ),
    pytest.param(
        "UTC", "0 12 30 * *", "2026-01-01 00:00", "2027-01-01 00:00",
        ["2026-01-30 12:00", "2026-03-30 12:00", "2026-04-30 12:00", "2026-05-30 12:00",
         "2026-06-30 12:00", "2026-07-30 12:00", "2026-08-30 12:00", "2026-09-30 12:00",
         "2026-10-30 12:00", "2026-11-30 12:00", "2026-12-30 12:00"],
        id="30th-skips-february",
    ),
    pytest.param(
        "UTC", "0 0 29 2 *", "2023-01-01 00:00", "2033-01-01 00:00",
        ["2024-02-29 00:00", "2028-02-29 00:00", "2032-02-29 00:00"],
        id="feb-29-leap-years",
    ),
    pytest.param(
        "Europe/Berlin", "0 0 31 * *", "2026-03-01 00:00", "2026-06-01 00:00",
        ["2026-03-30 22:00", "2026-05-30 22:00"],  # 31 Mar / 31 May 00:00 CEST
        id="31st-in-berlin",
    ),
    pytest.param(
        "Europe/Berlin", "0 0 29 2 *", "2027-01-01 00:00", "2029-01-01 00:00",
        ["2028-02-28 23:00"],  # 29 Feb 2028 00:00 CET
        id="feb-29-in-berlin",
    ),
    # Debian's day rule (docs/cron.md): a day field beginning with "*" (here "*/10") means
    # both day fields must match: days 1, 11, 21, 31 that are a Wednesday or Thursday.
    # March 2026 starts on a Sunday: Sun 1, Wed 11, Sat 21, Tue 31; April: Wed 1, Sat 11,
    # Tue 21.
    pytest.param(
        "Europe/Berlin", "11 2 */10 * 3-4", "2026-03-01 00:00", "2026-04-30 00:00",
        ["2026-03-11 01:11",  # Wed 11 March 02:11 CET
         "2026-04-01 00:11"],  # Wed 1 April 02:11 CEST
        id="stepped-day-of-month-and-weekday-both-match",
    ),
    # Day of month and day of week both restricted: either matches (Vixie cron).
    # February 2026 starts on a Sunday: Fridays are the 6th, 13th, 20th and 27th.
    pytest.param(
        "UTC", "0 0 15 * 5", "2026-02-01 00:00", "2026-03-01 00:00",
        ["2026-02-06 00:00", "2026-02-13 00:00", "2026-02-15 00:00", "2026-02-20 00:00",
         "2026-02-27 00:00"],
        id="day-of-month-or-day-of-week",
    ),
]
# fmt: on


@pytest.mark.parametrize(("zone", "expr", "start", "end", "expected"), CASES)
def test_fire_times_between(
    zone: str, expr: str, start: str, end: str, expected: list[str]
) -> None:
    fires = fire_times_between(cron(expr, zone), at(start), at(end))
    assert fires == [at(text) for text in expected]
    assert all(fire.tzinfo is UTC for fire in fires)


@pytest.mark.parametrize(("zone", "expr", "start", "end", "expected"), CASES)
def test_next_fire_after_is_first_of_between(
    zone: str, expr: str, start: str, end: str, expected: list[str]
) -> None:
    schedule = cron(expr, zone)
    first = fire_times_between(schedule, at(start), at(end))[:1]
    assert first == [at(text) for text in expected[:1]]
    if first:
        assert next_fire_after(schedule, at(start)) == first[0]


@pytest.mark.parametrize(("zone", "expr", "start", "end", "expected"), CASES)
def test_fire_times_after_counts(
    zone: str, expr: str, start: str, end: str, expected: list[str]
) -> None:
    fires = fire_times_after(cron(expr, zone), at(start), len(expected))
    assert fires == [at(text) for text in expected]


# fmt: off
EVERY_CASES = [
    pytest.param(
        "30s", "UTC", "2026-03-29 00:59:45", "2026-03-29 01:01:00",
        ["2026-03-29 01:00:00", "2026-03-29 01:00:30", "2026-03-29 01:01:00"],
        id="30s",
    ),
    pytest.param(
        "1h", "Europe/Berlin", "2026-10-24 23:30", "2026-10-25 02:00",
        ["2026-10-25 00:00", "2026-10-25 01:00", "2026-10-25 02:00"],
        id="1h-ignores-fall-back",
    ),
    pytest.param(
        "1h", "Europe/Berlin", "2026-03-28 23:30", "2026-03-29 02:00",
        ["2026-03-29 00:00", "2026-03-29 01:00", "2026-03-29 02:00"],
        id="1h-ignores-spring-forward",
    ),
    # 2026-01-01T00:00Z is 20454 days = 1767225600 s after the epoch; 20454 = 7 * 2922.
    pytest.param(
        "7s", "UTC", "2025-12-31 23:59:55", "2026-01-01 00:00:14",
        ["2026-01-01 00:00:00", "2026-01-01 00:00:07", "2026-01-01 00:00:14"],
        id="7s-epoch-aligned",
    ),
    # 86400 = 7 * 12342 + 6, so the next day's multiples sit at 00:00:01, 00:00:08...
    pytest.param(
        "7s", "UTC", "2026-01-01 23:59:59", "2026-01-02 00:00:08",
        ["2026-01-02 00:00:01", "2026-01-02 00:00:08"],
        id="7s-next-day",
    ),
    pytest.param(
        "1h30m", "UTC", "2026-01-01 00:00", "2026-01-01 04:00",
        ["2026-01-01 01:30", "2026-01-01 03:00"],  # 1767225600 = 5400 * 327264
        id="90m",
    ),
    pytest.param(
        "1d", "Asia/Kolkata", "2026-03-28 12:00", "2026-03-29 12:00",
        ["2026-03-29 00:00"],  # epoch-aligned UTC midnight, not local midnight
        id="1d-ignores-zone",
    ),
]
# fmt: on


@pytest.mark.parametrize(("duration", "zone", "start", "end", "expected"), EVERY_CASES)
def test_every_fires_on_epoch_multiples(
    duration: str, zone: str, start: str, end: str, expected: list[str]
) -> None:
    schedule = every(duration, zone)
    assert fire_times_between(schedule, at(start), at(end)) == [at(t) for t in expected]
    assert next_fire_after(schedule, at(start)) == at(expected[0])
    assert fire_times_after(schedule, at(start), len(expected)) == [at(t) for t in expected]


def test_feb_29_skips_2100() -> None:
    assert fire_times_after(cron("0 0 29 2 *"), at("2096-03-01 00:00"), 2) == [
        at("2104-02-29 00:00"),  # 2100 is not a leap year
        at("2108-02-29 00:00"),
    ]


def test_yearly_next_fire() -> None:
    assert next_fire_after(cron("@yearly", "Europe/Berlin"), at("2026-06-01 00:00")) == at(
        "2026-12-31 23:00"  # 1 Jan 2027 00:00 CET
    )


def test_between_start_is_exclusive_end_inclusive() -> None:
    schedule = cron("30 2 * * *")
    assert fire_times_between(schedule, at("2026-03-29 02:30"), at("2026-03-30 02:30")) == [
        at("2026-03-30 02:30")
    ]
    assert fire_times_between(schedule, at("2026-03-29 02:30"), at("2026-03-29 02:30")) == []
    assert fire_times_between(schedule, at("2026-03-30 00:00"), at("2026-03-29 00:00")) == []
    assert next_fire_after(schedule, at("2026-03-29 02:30")) == at("2026-03-30 02:30")
    assert next_fire_after(schedule, at("2026-03-29 02:29:59.999999")) == at("2026-03-29 02:30")


def test_every_boundaries() -> None:
    schedule = every("30s")
    assert fire_times_between(schedule, at("2026-01-01 00:00:00"), at("2026-01-01 00:00:30")) == [
        at("2026-01-01 00:00:30")
    ]
    assert fire_times_between(schedule, at("2026-01-01 00:00:01"), at("2026-01-01 00:00:29")) == []
    assert next_fire_after(schedule, at("2026-01-01 00:00:30")) == at("2026-01-01 00:01:00")


def test_inputs_in_any_zone_mean_the_same_instant() -> None:
    schedule = cron("30 2 * * *", "Europe/Berlin")
    start = at("2026-03-28 12:00").astimezone(ZoneInfo("America/Los_Angeles"))
    end = at("2026-03-29 12:00").astimezone(ZoneInfo("Asia/Tokyo"))
    assert fire_times_between(schedule, start, end) == [at("2026-03-29 01:00")]
    assert next_fire_after(schedule, start) == at("2026-03-29 01:00")


def test_minutely_next_fire() -> None:
    schedule = cron("* * * * *", "Europe/Berlin")
    assert next_fire_after(schedule, at("2026-05-01 12:00:30")) == at("2026-05-01 12:01")
    # In the first pass of the repeated hour the next minute is still the next fire.
    assert next_fire_after(schedule, at("2026-10-25 00:30")) == at("2026-10-25 00:31")
    assert next_fire_after(schedule, at("2026-10-25 00:59")) == at("2026-10-25 01:00")


NAIVE = datetime(2026, 3, 29, 1, 0)  # noqa: DTZ001 - the mistake under test


@pytest.mark.parametrize(
    "call",
    [
        lambda s: fire_times_between(s, NAIVE, at("2026-03-30 00:00")),
        lambda s: fire_times_between(s, at("2026-03-28 00:00"), NAIVE),
        lambda s: next_fire_after(s, NAIVE),
        lambda s: fire_times_after(s, NAIVE, 3),
        lambda s: unique_key(s, NAIVE),
    ],
    ids=["between-start", "between-end", "next", "after", "unique-key"],
)
def test_naive_datetimes_rejected(call: Callable[[Schedule], object]) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        call(cron("30 2 * * *", "Europe/Berlin"))


def test_fire_times_after_zero_and_negative() -> None:
    assert fire_times_after(cron("* * * * *"), at("2026-01-01 00:00"), 0) == []
    with pytest.raises(ValueError, match="negative"):
        fire_times_after(cron("* * * * *"), at("2026-01-01 00:00"), -1)


def test_unique_key_format() -> None:
    schedule = cron("30 2 * * *", "Europe/Berlin", name="daily_report")
    fire = at("2026-03-29 01:00")
    assert unique_key(schedule, fire) == "daily_report@2026-03-29T01:00:00Z"
    local = fire.astimezone(ZoneInfo("Europe/Berlin"))  # 03:00+02:00: same instant, same key
    assert unique_key(schedule, local) == "daily_report@2026-03-29T01:00:00Z"


def test_fall_back_fixed_job_one_key_hourly_job_two() -> None:
    start, end = at("2026-10-24 22:00"), at("2026-10-25 04:00")
    fixed = cron("0 2 * * *", "Europe/Berlin", name="daily_report")
    hourly = cron("0 * * * *", "Europe/Berlin", name="hourly")
    fixed_keys = [unique_key(fixed, t) for t in fire_times_between(fixed, start, end)]
    assert fixed_keys == ["daily_report@2026-10-25T00:00:00Z"]
    berlin = ZoneInfo("Europe/Berlin")
    at_two = [t for t in fire_times_between(hourly, start, end) if t.astimezone(berlin).hour == 2]
    assert [unique_key(hourly, t) for t in at_two] == [
        "hourly@2026-10-25T00:00:00Z",  # 02:00 CEST
        "hourly@2026-10-25T01:00:00Z",  # 02:00 CET
    ]


def test_fire_times_ignore_host_clock_and_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = cron("30 2 * * *", "Europe/Berlin")
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    time.tzset()
    try:
        with freeze_time("2026-03-29 00:30:00"):  # freezegun reads this as UTC
            now = datetime.now(UTC)
            assert next_fire_after(schedule, now) == at("2026-03-29 01:00")
            assert fire_times_after(schedule, now, 2) == [
                at("2026-03-29 01:00"),
                at("2026-03-30 00:30"),
            ]
        with freeze_time("2026-10-24 23:00:00"):
            assert next_fire_after(schedule, datetime.now(UTC)) == at("2026-10-25 00:30")
    finally:
        monkeypatch.undo()
        time.tzset()


# An independent model of the policy: walk every UTC minute and read the wall clock.
# A fixed-time job fires where the wall clock reads a match for the first time, or at
# the first minute after a jump that skipped a match; a wildcard job at every match.
def reference_fires(
    matches: Callable[[datetime], bool], zone: str, fixed: bool, start: datetime, end: datetime
) -> list[datetime]:
    tz = ZoneInfo(zone)
    fires = []
    previous = (start - timedelta(minutes=1)).astimezone(tz).replace(tzinfo=None)
    instant = start
    while instant <= end:
        wall = instant.astimezone(tz)
        local = wall.replace(tzinfo=None)
        skipped = [
            previous + timedelta(minutes=n)
            for n in range(1, (local - previous) // timedelta(minutes=1))
        ]
        if (fixed and any(map(matches, skipped))) or (
            matches(local) and (not fixed or wall.fold == 0)
        ):
            fires.append(instant)
        previous, instant = local, instant + timedelta(minutes=1)
    return fires


REFERENCE_EXPRESSIONS = {
    "30 2 * * *": lambda t: (t.hour, t.minute) == (2, 30),
    "15,30 2 * * *": lambda t: t.hour == 2 and t.minute in (15, 30),
    "45 1 * * *": lambda t: (t.hour, t.minute) == (1, 45),
    "0 3 * * *": lambda t: (t.hour, t.minute) == (3, 0),
    "0 * * * *": lambda t: t.minute == 0,
    "*/15 * * * *": lambda t: t.minute % 15 == 0,
    "*/10 1-3 * * *": lambda t: 1 <= t.hour <= 3 and t.minute % 10 == 0,
}
REFERENCE_TRANSITIONS = [
    ("Europe/Berlin", "2026-03-29 01:00"),
    ("Europe/Berlin", "2026-10-25 01:00"),
    ("America/New_York", "2026-03-08 07:00"),
    ("America/New_York", "2026-11-01 06:00"),
    ("Australia/Lord_Howe", "2026-10-03 15:30"),
    ("Australia/Lord_Howe", "2026-04-04 15:00"),
    ("Pacific/Chatham", "2026-09-26 14:00"),
    ("Pacific/Chatham", "2026-04-04 14:00"),
    ("America/Sao_Paulo", "2018-11-04 03:00"),
]


@pytest.mark.parametrize(("zone", "transition"), REFERENCE_TRANSITIONS)
@pytest.mark.parametrize("expr", REFERENCE_EXPRESSIONS)
def test_matches_minute_by_minute_reference(zone: str, transition: str, expr: str) -> None:
    schedule = cron(expr, zone)
    start, end = at(transition) - timedelta(hours=4), at(transition) + timedelta(hours=4)
    expected = reference_fires(
        REFERENCE_EXPRESSIONS[expr], zone, schedule.is_fixed_time, start, end
    )
    assert fire_times_between(schedule, start, end) == [t for t in expected if t > start]


@pytest.mark.parametrize(
    ("expr", "fixed"),
    [
        ("30 2 * * *", True),
        ("0,30 1-3 * * 1-5", True),
        ("0 */2 * * *", False),
        ("*/15 2 * * *", False),
        ("0 * * * *", False),
        ("* * * * *", False),
        ("@hourly", False),
        ("@daily", True),
        ("@weekly", True),
        ("@monthly", True),
        ("@yearly", True),
        ("@midnight", True),
        ("@annually", True),
        # Debian looks at the first character only: "1,*/2" is a fixed-time hour field.
        ("0 1,*/2 * * *", True),
        ("5,*/15 2 * * *", True),
    ],
)
def test_is_fixed_time(expr: str, fixed: bool) -> None:
    assert cron(expr).is_fixed_time is fixed


def test_every_is_not_fixed_time() -> None:
    assert every("30s").is_fixed_time is False


@pytest.mark.parametrize(
    ("expr", "normalised"),
    [
        ("0 2 * * *", "0 2 * * *"),
        ("  0   2 *\t* MON ", "0 2 * * mon"),
        ("@Daily", "@daily"),
        ("*/15 9-17 * JAN-MAR mon-fri", "*/15 9-17 * jan-mar mon-fri"),
        ("0 0 * * 7", "0 0 * * 7"),
    ],
)
def test_validate_cron_normalises(expr: str, normalised: str) -> None:
    assert validate_cron(expr) == normalised


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("61 * * * *", "minute 61 is out of range 0-59"),
        ("0 24 * * *", "hour 24 is out of range 0-23"),
        ("0 0 0 * *", "day-of-month 0 is out of range 1-31"),
        ("0 0 * 13 *", "month 13 is out of range 1-12"),
        ("0 0 * * 8", "day-of-week 8 is out of range 0-7"),
        ("0 0 * foo *", "month 'foo' is not a number or a name"),
        ("* * * *", "expected 5 fields"),
        ("0 0 * * * *", "expected 5 fields"),
        ("", "expected 5 fields"),
        ("@fortnightly", "unknown shortcut"),
        ("@reboot", "@reboot is not a period"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("0 0 L * *", "day-of-month 'l' is not a number"),
        ("0 0 * * 1#2", "Debian cron has no L, W, #, \\? or H"),
        ("H * * * *", "minute 'h' is not a number"),
        ("*/0 * * * *", "minute step 0 must be between 1 and"),
        ("1,,2 * * * *", "minute field '1,,2': '' is not a value"),
        ("5-3 * * * *", "minute range 5-3 runs backwards"),
    ],
)
def test_invalid_cron_rejected(expr: str, reason: str) -> None:
    with pytest.raises(ValueError, match=f"bad cron expression .*{reason}"):
        validate_cron(expr)
    with pytest.raises(ValidationError, match="bad cron expression"):
        cron(expr)


@pytest.mark.parametrize(
    "zone", ["Mars/Base", "europe/berlin", "Europe", "", "localtime", "right/UTC", "../etc"]
)
def test_unknown_time_zone_rejected(zone: str) -> None:
    with pytest.raises(ValidationError, match="unknown time zone"):
        cron("0 2 * * *", zone)


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "Etc/GMT+5", "Pacific/Chatham"])
def test_known_time_zone_accepted(zone: str) -> None:
    assert cron("0 2 * * *", zone).zone == ZoneInfo(zone)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("500ms", "whole number of seconds"),
        ("1s500ms", "whole number of seconds"),
        (timedelta(seconds=1.5), "whole number of seconds"),
        (timedelta(0), "at least 1s"),
        ("0s", "greater than zero"),
        ("soon", "bad duration"),
        (30, "expected a duration"),
    ],
)
def test_bad_every_rejected(value: object, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        Schedule.model_validate({"name": "tick", "kind": "tick", "every": value})


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"cron": "* * * * *", "every": "1m"}, "not both"),
        ({}, "missing 'cron' or 'every'"),
        ({"every": "1m", "catch_up_window": timedelta(0)}, "greater than zero"),
        ({"every": "1m", "max_attempts": 0}, "greater than or equal to 1"),
        ({"every": "1m", "max_attempts": "3"}, "valid integer"),
        ({"every": "1m", "catch_up": "sometimes"}, "'none', 'latest' or 'all'"),
        ({"every": "1m", "timezon": "UTC"}, "Extra inputs"),
        ({"every": "1m", "name": "my report"}, "characters other than"),
        ({"every": "1m", "name": "."}, "not a schedule name"),
        ({"every": "1m", "name": ".."}, "not a schedule name"),
        ({"every": "1m", "payload": {"at": NAIVE}}, "must be JSON"),
        ({"every": "1m", "payload": {"x": float("nan")}}, "must be JSON"),
    ],
)
def test_bad_schedule_rejected(fields: dict[str, object], reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        Schedule.model_validate({"name": "job", "kind": "job", **fields})


def test_durations_accept_text_and_serialise_back() -> None:
    schedule = Schedule.model_validate(
        {"name": "tick", "kind": "tick", "every": "1h30m", "catch_up_window": "2h"}
    )
    assert schedule.every == timedelta(minutes=90)
    assert schedule.catch_up_window == timedelta(hours=2)
    dumped = schedule.model_dump_json()
    assert '"every":"1h30m"' in dumped
    assert Schedule.model_validate_json(dumped) == schedule


def _model_accepts_name(value: object) -> bool:
    try:
        Schedule.model_validate({"name": value, "kind": "k", "every": "1m"})
    except ValidationError:
        return False
    return True


@given(st.text(max_size=210) | st.from_regex(r"[A-Za-z0-9_.:-]{1,205}", fullmatch=True))
def test_is_schedule_name_agrees_with_the_model(name: str) -> None:
    assert is_schedule_name(name) is _model_accepts_name(name)


@pytest.mark.parametrize("value", [".", "..", "...", "a" * 200, "a" * 201, "", "a b", 7, None])
def test_is_schedule_name_at_the_edges(value: object) -> None:
    assert is_schedule_name(value) is _model_accepts_name(value)


@pytest.mark.parametrize("cron", ["0 * * * *", "30 2 * * *", "*/7 1-3 * * *", "59 23 * * *"])
def test_scan_starts_shared_by_many_calls_change_no_answer(cron: str) -> None:
    """A tick shares one ScanStarts over its calls; around both of Berlin's 2026 changes,
    ``after`` given in UTC and as either reading of a repeated wall time (fold 0 and 1,
    which Python holds equal), every answer is the one worked out alone."""
    berlin = ZoneInfo("Europe/Berlin")
    schedule = Schedule(name="s", kind="k", cron=cron, timezone="Europe/Berlin")
    shared: dict[tuple[datetime, ZoneInfo], datetime] = {}
    for night in (at("2026-03-28 22:00"), at("2026-10-24 22:00")):
        for minute in range(0, 8 * 60, 7):
            instant = night + timedelta(minutes=minute, seconds=minute % 3 * 30)
            local = instant.astimezone(berlin)
            for after in (instant, local, local.replace(fold=1 - local.fold)):
                alone = next_fire_after(schedule, after)
                assert next_fire_after(schedule, after, shared) == alone, (cron, after)
