from datetime import timedelta

import pytest

from pgbeat.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500ms", timedelta(milliseconds=500)),
        ("30s", timedelta(seconds=30)),
        ("5m", timedelta(minutes=5)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1d2h3m4s5ms", timedelta(days=1, hours=2, minutes=3, seconds=4, milliseconds=5)),
        ("90s", timedelta(seconds=90)),
        (" 7D ", timedelta(days=7)),
    ],
)
def test_parses_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "5", "1x", "1.5h", "-1s", "m", "30m1h", "1h 30m", "0s", "ms"])
def test_rejects_bad_durations_in_one_line(text: str) -> None:
    with pytest.raises(ValueError, match="bad duration") as info:
        parse_duration(text)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text", ["500ms", "30s", "5m", "2h", "1d", "1h30m", "1m500ms"])
def test_format_round_trips(text: str) -> None:
    assert format_duration(parse_duration(text)) == text


def test_format_normalises() -> None:
    assert format_duration(timedelta(seconds=90)) == "1m30s"
    assert format_duration(timedelta(0)) == "0s"


@pytest.mark.parametrize("text", ["99999999999d", "1000000000d", "99999999999999999999ms", "3661d"])
def test_huge_durations_are_one_line_errors(text: str) -> None:
    with pytest.raises(ValueError, match="bad duration") as info:
        parse_duration(text)
    assert "\n" not in str(info.value)


def test_ten_years_is_accepted() -> None:
    assert parse_duration("3660d") == timedelta(days=3660)
