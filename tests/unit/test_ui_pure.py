"""The dashboard's pure parts: words for schedules, DST notes, filters, masking, sessions.

Expected instants are worked out by hand from each zone's rules.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl
from zoneinfo import ZoneInfo

import pytest

from pgbeat.errors import UiError
from pgbeat.scheduling.schedule import Schedule
from pgbeat.ui import timefmt, timeline
from pgbeat.ui.describe import describe_cron, describe_every
from pgbeat.ui.filters import FilterError, JobFilter
from pgbeat.ui.redact import MASK, mask_secrets, payload_text
from pgbeat.ui.security import Keys, same_origin
from pgbeat.ui.settings import UiSettings, check_bind, host_name, normalize_prefix


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def cron(expr: str, zone: str = "UTC") -> Schedule:
    return Schedule(name="s", kind="s", cron=expr, timezone=zone)


# -- plain words ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "words"),
    [
        ("30 2 * * *", "at 02:30 every day"),
        ("@daily", "at 00:00 every day"),
        ("@hourly", "at minute 0 of every hour"),
        ("*/15 * * * *", "every 15 minutes"),
        ("* * * * *", "every minute"),
        ("0 9 * * 1-5", "at 09:00 on Monday to Friday"),
        ("0 9,17 * * sat,sun", "at 09:00 and 17:00 on Saturday and Sunday"),
        ("0 6 1 * *", "at 06:00 on day 1 of the month"),
        ("0 6 1 1,7 *", "at 06:00 on day 1 of the month in January and July"),
        ("0 6 13 * 5", "at 06:00 on day 13 of the month or on Friday"),
        ("0 6 */2 * 5", "at 06:00 on day 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, "
         "29 and 31 of the month and on Friday"),
        ("0 */6 * * *", "at minute 0 of every 6th hour"),
        ("0,30 8-12 * * *", "10 times a day"),
        ("0,30 8-12 * * 1", "10 times a day on Monday"),
    ],
)  # fmt: skip
def test_cron_in_plain_words(expr: str, words: str) -> None:
    assert describe_cron(expr) == words


@pytest.mark.parametrize(
    ("every", "words"),
    [
        (timedelta(seconds=10), "every 10 seconds"),
        (timedelta(minutes=1), "every minute"),
        (timedelta(hours=1, minutes=30), "every 1 hour 30 minutes"),
        (timedelta(days=1), "every day"),
    ],
)
def test_intervals_in_plain_words(every: timedelta, words: str) -> None:
    assert describe_every(every) == words


# -- time text -----------------------------------------------------------------------------


def test_local_text_prints_the_abbreviation_and_the_offset() -> None:
    zone = ZoneInfo("America/New_York")
    assert (
        timefmt.local_text(at("2027-01-05 07:30"), zone)
        == "Tue 2027-01-05 02:30 EST (UTC\u221205:00)"
    )
    assert timefmt.zone_now_text(ZoneInfo("Asia/Kolkata"), at("2027-01-05 00:00")) == (
        "Asia/Kolkata (IST, UTC+05:30)"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.25, "250ms"),
        (12.34, "12.3s"),
        (245, "4m05s"),
        (3 * 3600 + 720, "3h12m"),
        (-90, "\u22121m30s"),
    ],
)
def test_durations(seconds: float, text: str) -> None:
    assert timefmt.duration_text(seconds) == text


def test_capped_counts() -> None:
    assert timefmt.count_text(9_999, 10_000) == "9,999"
    assert timefmt.count_text(10_001, 10_000) == "10,000+"


# -- the preview's DST notes -----------------------------------------------------------------


def test_preview_notes_the_new_york_spring_gap_and_fall_fold() -> None:
    daily = cron("30 2 * * *", "America/New_York")
    spring = timeline.preview(daily, at("2027-03-13 12:00"), 2)
    # 02:30 does not exist on 2027-03-14: the job runs at 03:00 EDT = 07:00Z.
    assert spring[0].at == at("2027-03-14 07:00")
    assert spring[0].note.startswith("GAP")
    assert "clocks go forward UTC\u221205:00 \u2192 UTC\u221204:00" in spring[0].note
    assert spring[1].at == at("2027-03-15 06:30") and spring[1].gap == timedelta(
        hours=23, minutes=30
    )
    night = cron("30 1 * * *", "America/New_York")
    fall = timeline.preview(night, at("2027-11-06 12:00"), 2)
    # 01:30 happens twice on 2027-11-07: once, at the first (EDT, 05:30Z).
    assert fall[0].at == at("2027-11-07 05:30") and fall[0].note.startswith("FOLD")
    assert fall[1].at == at("2027-11-08 06:30")


def test_preview_of_an_interval_schedule_says_it_keeps_elapsed_time() -> None:
    hourly = Schedule.model_validate(
        {"name": "h", "kind": "h", "every": "1h", "timezone": "Europe/Berlin"}
    )
    fires = timeline.preview(hourly, at("2027-03-28 00:30"), 2)
    assert fires[0].at == at("2027-03-28 01:00") and fires[0].gap == timedelta(hours=1)
    assert fires[0].note.endswith("(interval schedules keep elapsed time)")
    assert fires[1].note == ""


def test_preview_is_bounded() -> None:
    assert len(timeline.preview(cron("* * * * *"), at("2027-01-01 00:00"), 10_000)) == 200


def test_the_dst_badge_looks_seven_days_ahead() -> None:
    zone = ZoneInfo("Europe/Berlin")
    change = timeline.next_dst_change(zone, at("2027-03-25 00:00"))
    assert change is not None and change.at == at("2027-03-28 01:00")
    assert timeline.next_dst_change(zone, at("2027-03-10 00:00")) is None
    assert timeline.next_dst_change(ZoneInfo("UTC"), at("2027-03-25 00:00")) is None


# -- filters ---------------------------------------------------------------------------------


def test_a_filter_survives_the_url_round_trip() -> None:
    query = {"status": "failed", "kind": "email", "payload": '{"b": 1, "a": "x"}', "id": ""}
    job_filter = JobFilter.from_query(query)
    assert job_filter.payload == '{"a":"x","b":1}'
    again = JobFilter.from_query(dict(parse_qsl(job_filter.query())))
    assert again.status == "failed" and again.kind == "email"
    assert job_filter.actions() == ("retry", "delete")
    assert job_filter.describe() == 'status = failed, kind = email, payload \u2287 {"a":"x","b":1}'


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ({"status": "lost"}, "status: one of"),
        ({"id": "12a"}, "id: a job id"),
        ({"payload": "[1]"}, "payload: a JSON object"),
        ({"payload": "{oops"}, "payload: not JSON"),
        ({"created_from": "yesterday"}, "created_from: a date"),
    ],
)
def test_bad_filters_name_their_field(query: dict[str, str], problem: str) -> None:
    with pytest.raises(FilterError, match=problem):
        JobFilter.from_query(query)


def test_like_patterns_are_escaped() -> None:
    params = JobFilter(schedule="daily_report", error="100%").params()
    assert params["key_like"] == "daily\\_report@%"
    assert params["error_like"] == "%100\\%%"


def test_which_searches_need_a_window_of_ids() -> None:
    assert not JobFilter().searches_window()
    assert not JobFilter(status="failed", kind="email").searches_window()
    assert JobFilter(status="failed", payload="{}").searches_window()
    assert JobFilter(kind="email").searches_window()
    assert not JobFilter(kind="email", id=5).searches_window()


# -- payloads ----------------------------------------------------------------------------------


def test_secret_looking_keys_are_masked_at_any_depth() -> None:
    payload = {"user": 1, "password": "p", "nested": [{"apiKey": "k", "ok": "v"}], "Token": 2}
    assert mask_secrets(payload) == {
        "user": 1,
        "password": MASK,
        "nested": [{"apiKey": MASK, "ok": "v"}],
        "Token": MASK,
    }
    assert "p" not in payload_text({"password": "p"}, hidden=False, pretty=True).split(":")[1]
    assert payload_text({"a": 1}, hidden=True, pretty=False).startswith("(payloads are hidden")


# -- settings and sessions ---------------------------------------------------------------------


def test_a_public_address_needs_a_token() -> None:
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("0.0.0.0", "t" * 20)
    for host in ("0.0.0.0", "192.168.1.10", "example.org"):
        with pytest.raises(UiError, match="without a token"):
            check_bind(host, None)


def test_prefixes_and_hosts_are_normalised() -> None:
    assert normalize_prefix("pgbeat/") == "/pgbeat"
    assert normalize_prefix("/") == ""
    with pytest.raises(UiError):
        normalize_prefix("/a/../b")
    assert host_name("LocalHost:8080") == "localhost"
    assert host_name("[::1]:8080") == "[::1]"
    settings = UiSettings(database_url="x", allowed_hosts=("dash.example",))
    assert settings.host_allowed("dash.example:443")
    assert not settings.host_allowed("evil.example")


def test_sessions_are_signed_and_expire() -> None:
    keys = Keys(b"k" * 32)
    cookie = keys.session_cookie("admin", now=1000)
    assert keys.read_session(cookie, now=1000 + 3600) == "admin"
    assert keys.read_session(cookie, now=1000 + 13 * 3600) is None
    forged = cookie.replace("admin", "viewer", 1)
    assert keys.read_session(forged, now=1000) is None
    assert Keys(b"other" * 8).read_session(cookie, now=1000) is None
    assert keys.csrf_ok("s", keys.csrf_token("s")) and not keys.csrf_ok("t", keys.csrf_token("s"))


@pytest.mark.parametrize(
    ("headers", "ok"),
    [
        ({"host": "a:1"}, True),
        ({"host": "a:1", "sec-fetch-site": "same-origin", "origin": "http://a:1"}, True),
        ({"host": "a:1", "origin": "https://a:1"}, True),
        ({"host": "a:1", "sec-fetch-site": "same-site"}, False),
        ({"host": "a:1", "origin": "http://b:1"}, False),
        ({"host": "a:1", "origin": "null"}, False),
    ],
)
def test_same_origin(headers: dict[str, str], ok: bool) -> None:
    assert same_origin(headers) is ok


def test_importing_pgbeat_imports_no_web_package() -> None:
    code = (
        "import sys, pgbeat; "
        "print([m for m in sys.modules if m.split('.')[0] in ('starlette', 'jinja2', 'uvicorn')])"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
