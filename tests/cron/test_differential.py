"""pgbeat's cron fire times against cronsim and the brute-force model (short version).

The long version is ``python -m tests.cron --long`` (docs/cron.md). The rows at the end
are every kind of case where cronsim and the brute force disagreed; crontab(5) decides
them, and pgbeat does what the brute force does.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cron.__main__ import SHORT, run
from tests.cron.brute_force import brute_force_between
from tests.cron.expressions import random_expression
from tests.cron.harness import Case, compare_case, pgbeat_next
from tests.cron.zones import ZONES, random_instant, starts_before, transitions

# hypothesis's failure report imports a deprecated module; the suite turns warnings into errors
pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict:DeprecationWarning")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_zones_cover_both_hemispheres_odd_offsets_and_changed_rules() -> None:
    assert len(ZONES) >= 40
    for zone in (
        "Australia/Lord_Howe",
        "Pacific/Chatham",
        "Africa/Casablanca",
        "Antarctica/Troll",
        "Asia/Amman",
        "America/Nuuk",
        "America/Godthab",
        "Australia/Sydney",
        "Europe/Berlin",
    ):
        assert zone in ZONES and transitions(zone), zone
    assert "America/Sao_Paulo" in ZONES and not transitions("America/Sao_Paulo")  # none since 2019
    assert len(transitions("Africa/Casablanca")) > 20  # two shifts a year around Ramadan


@pytest.mark.slow
def test_short_sweep_has_no_mismatch() -> None:
    """A start just before every 2020-2030 transition of every zone, plus random starts."""
    checked, findings = run(random.Random(2026), **SHORT)
    mismatches = [finding for finding in findings if finding.is_mismatch]
    assert checked > 800
    assert not mismatches, "\n".join(map(str, mismatches[:10]))


@settings(max_examples=80, deadline=None)
@given(st.randoms(use_true_random=False), st.sampled_from(ZONES), st.booleans())
def test_random_expression_zone_and_start_agree(
    rng: random.Random, zone: str, near_a_transition: bool
) -> None:
    changes = transitions(zone)
    if near_a_transition and changes:
        start = rng.choice(starts_before(rng.choice(changes), rng))
    else:
        start = random_instant(rng)
    case = Case(random_expression(rng), zone, start)
    mismatches = [finding for finding in compare_case(case) if finding.is_mismatch]
    assert not mismatches, "\n".join(map(str, mismatches))


# Where cronsim and the brute force disagree, decided by crontab(5) and Debian's DST
# rules (docs/cron.md, "When the evaluators disagree"). Expected instants worked out by
# hand from each zone's rules; what cronsim says is noted beside.
# (expression, zone, start, pgbeat's next fires, the documented cronsim deviation)
# fmt: off
DISAGREEMENTS = [
    pytest.param(
        "5-5/10 0 * * *", "UTC", "2026-01-01 00:00",
        ["2026-01-01 00:05", "2026-01-02 00:05"],  # cronsim: 00:05, 00:15, 00:25, ...
        "cronsim-one-value-step",
        id="one-value-range-with-a-step-is-that-value",
    ),
    pytest.param(
        # Lord Howe 2025-10-05 02:00 +10:30 -> 02:30 +11 at 2025-10-04 15:30Z
        "*/30 21 * * *", "Australia/Lord_Howe", "2025-10-04 15:29",
        ["2025-10-05 10:00", "2025-10-05 10:30"],  # 21:00, 21:30 +11; cronsim skips 21:00
        "cronsim-off-hour-transition",
        id="lord-howe-spring-30-minute-shift",
    ),
    pytest.param(
        # Lord Howe 2024-04-07 02:00 +11 -> 01:30 +10:30 at 2024-04-06 15:00Z
        "45 * * * *", "Australia/Lord_Howe", "2024-04-06 13:00",
        ["2024-04-06 13:45",  # 00:45 +11
         "2024-04-06 14:45",  # 01:45 +11
         "2024-04-06 15:15",  # 01:45 +10:30: the wall clock shows it again (cronsim: no)
         "2024-04-06 16:15"],  # 02:45 +10:30
        "cronsim-off-hour-transition",
        id="lord-howe-fall-back-wildcard-hour-both-passes",
    ),
    pytest.param(
        # Chatham 2030-04-07 03:45 +13:45 -> 02:45 +12:45 at 2030-04-06 14:00Z
        "*/5 2 * * *", "Pacific/Chatham", "2030-04-06 13:00",
        ["2030-04-06 13:05", "2030-04-06 13:10",  # 02:50, 02:55 +13:45
         "2030-04-06 14:00", "2030-04-06 14:05", "2030-04-06 14:10",  # 02:45-02:55 +12:45
         "2030-04-07 13:15"],  # 02:00 +12:45; cronsim skips the second 02:45-02:55
        "cronsim-off-hour-transition",
        id="chatham-fall-back-repeats-a-part-of-hour-2",
    ),
    pytest.param(
        # Havana 2028-03-12 00:00 -05 -> 01:00 -04 at 05:00Z; the 12th is a Sunday
        "* 0,2,3 * * 7", "America/Havana", "2028-03-12 04:59",
        ["2028-03-12 06:00", "2028-03-12 06:01"],  # 02:00 -04; cronsim: 05:00Z, an
        "cronsim-midnight-gap",                     # 00:00 that the clock never shows
        id="havana-no-midnight-on-a-spring-forward-sunday",
    ),
    pytest.param(
        # Azores 2028-03-26 00:00 -01 -> 01:00 +00 at 01:00Z; the 26th is a Sunday
        "*/30 1,4 * * sun", "Atlantic/Azores", "2028-03-26 00:59",
        ["2028-03-26 01:00", "2028-03-26 01:30", "2028-03-26 04:00"],  # 01:00 +00 is shown:
        "cronsim-midnight-gap",                                        # cronsim skips it
        id="azores-first-hour-after-a-midnight-gap",
    ),
]
# fmt: on


@pytest.mark.parametrize(("expr", "zone", "start", "expected", "deviation"), DISAGREEMENTS)
def test_disagreement_decided_by_crontab5(
    expr: str, zone: str, start: str, expected: list[str], deviation: str
) -> None:
    fires = [at(text) for text in expected]
    assert pgbeat_next(expr, zone, at(start), len(fires)) == fires
    assert brute_force_between(expr, zone, at(start), fires[-1]) == fires
    findings = compare_case(Case(expr, zone, at(start)))
    assert {finding.kind for finding in findings} <= {deviation}, "\n".join(map(str, findings))
