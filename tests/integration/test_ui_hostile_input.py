"""What a viewer types cannot break the dashboard: every page answers hostile query values
(NUL, newlines, deep or non-finite JSON, lone surrogates, times at the ends of the calendar)
with a page or a 4xx that says what is wrong, never a 500; a filter cannot ask about what the
page masks; and the audit log cannot be fed forged lines."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest

from tests.integration.ui_support import Dashboard, dashboard

HOSTILE = [
    "\x00",
    "a\x00b",
    "line\nforged",
    "\r\n",
    "[" * 1100 + "]" * 1100,
    '{"a":' * 1100 + "1" + "}" * 1100,
    '{"x": NaN}',
    '{"x": 1e400}',
    '{"x": "\\ud800"}',
    '{"x": "\\u0000"}',
    "0001-01-01T00:00:00+14:00",
    "0001-01-01",
    "9999-12-31T23:59:59-14:00",
    "9999-12-31T23:59:59.999999",
    "99999999999999999999",
    "-1",
    "%",
    "\ud800",
]
PARAMETERS = [
    "status", "when", "kind", "schedule", "unique_key", "id", "created_from", "created_to",
    "finished_from", "finished_to", "payload", "error", "signature", "before", "page", "tag",
]  # fmt: skip
SCHEDULE_PARAMETERS = ["from", "before", "n", "state", "page"]


@pytest.fixture(scope="module")
def ui(ui_database: str, schedules_file: Path) -> Iterator[Dashboard]:
    with dashboard(ui_database, hide_payloads=False) as running:
        yield running


def _get(client: httpx.Client, path: str, name: str, value: str) -> httpx.Response:
    encoded = quote(value.encode("utf-8", "surrogatepass"), safe="")
    return client.get(f"{path}?{name}={encoded}")


@pytest.mark.slow
def test_no_hostile_query_value_makes_a_500(ui: Dashboard) -> None:
    failures = []
    targets = [("/jobs?", name) for name in PARAMETERS]
    targets += [("/jobs/confirm?action=retry&status=failed&", name) for name in PARAMETERS]
    targets += [("/failures?", "window"), ("/schedules?", "page"), ("/?", "window")]
    targets += [("/schedules/nightly_report?", name) for name in SCHEDULE_PARAMETERS]
    with httpx.Client(base_url=ui.origin, timeout=30) as client:
        for path, name in targets:
            for value in HOSTILE:
                encoded = quote(value.encode("utf-8", "surrogatepass"), safe="")
                response = client.get(f"{path}{name}={encoded}")
                if response.status_code >= 500 or "Traceback" in response.text:
                    failures.append((path, name, value[:30], response.status_code))
    assert failures == []


def test_a_bad_filter_value_is_named(ui: Dashboard) -> None:
    with httpx.Client(base_url=ui.origin, timeout=10) as client:
        for name, value, words in [
            ("kind", "a\x00b", "kind: control characters"),
            ("payload", '{"a":' * 40 + "1" + "}" * 40, "levels of nesting"),
            ("payload", '{"x": NaN}', "NaN"),
            ("payload", '{"x": "\\u0000"}', "NUL"),
            ("created_from", "0001-01-01T00:00:00+14:00", "between the years 1 and 9999"),
            ("finished_to", "9999-12-31T23:59:59-14:00", "between the years 1 and 9999"),
        ]:
            page = _get(client, "/jobs", name, value)
            assert page.status_code in (200, 400), (name, page.status_code)
            assert words in page.text, (name, value[:20])


def test_a_filter_on_a_masked_or_hidden_field_is_refused(
    ui: Dashboard, ui_database: str, schedules_file: Path
) -> None:
    """Else a viewer could confirm {"password": "hunter2"} from the rows that come back."""
    with httpx.Client(base_url=ui.origin, timeout=10) as client:
        for payload in ('{"api_key": "sk-live-3"}', '{"outer": {"password": "hunter2"}}'):
            page = _get(client, "/jobs", "payload", payload)
            assert "looks like a secret" in page.text, payload
            assert "sk-live-3" not in page.text.replace(quote("sk-live-3"), "")
        allowed = _get(client, "/jobs", "payload", '{"tenant": "acme"}')
        assert "looks like a secret" not in allowed.text
    with (
        dashboard(ui_database, hide_payloads=True) as hidden,
        httpx.Client(base_url=hidden.origin, timeout=10) as client,
    ):
        page = _get(client, "/jobs", "payload", '{"tenant": "acme"}')
        assert "payloads are hidden" in page.text and "cannot be filtered" in page.text


def test_the_signature_filter_searches_a_window_of_ids(ui: Dashboard) -> None:
    """A signature is computed row by row: like the error text, it searches id windows."""
    from pgbeat.ui.filters import JobFilter

    assert JobFilter(signature="abc").searches_window()
    assert JobFilter(status="failed", signature="abc").searches_window()
    assert not JobFilter(status="failed").searches_window()


def test_audit_lines_cannot_be_forged_with_newlines(
    ui: Dashboard, caplog: pytest.LogCaptureFixture
) -> None:
    from pgbeat.ui.security import audit_text

    assert audit_text("x\nui action retry by admin@1.2.3.4") == (
        "'x\\nui action retry by admin@1.2.3.4'"
    )
    assert audit_text("plain words") == "plain words"
    assert audit_text(12) == "12"
    forged = "email\nui action delete by admin@10.0.0.1: filter=all"
    with (
        caplog.at_level(logging.INFO, logger="pgbeat.ui.audit"),
        httpx.Client(base_url=ui.origin, timeout=10) as client,
    ):
        page = client.get("/jobs")
        csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        response = client.post(
            "/jobs/bulk",
            data={"csrf": csrf, "action": "retry", "kind": forged, "ids": "1"},
        )
    assert response.status_code == 400 and "control characters" in response.text
    assert all("\n" not in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("name", [".", ".."])
def test_dot_schedule_names_are_refused(
    name: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """/schedules/.. would resolve to another page of the dashboard."""
    import pgbeat
    from pgbeat.errors import ConfigError
    from pgbeat.scheduling.file import load_schedules

    with pytest.raises(pgbeat.ScheduleError, match="not a schedule name"):
        pgbeat.upsert_schedule(conn, name, every="1m", kind="noop")
    path = tmp_path / "schedules.toml"
    path.write_text(f'[schedules."{name}"]\nevery = "1m"\nkind = "noop"\n')
    with pytest.raises(ConfigError, match="not a schedule name"):
        load_schedules(path)


def test_hostile_paths_and_forms_are_refused_not_500(ui: Dashboard) -> None:
    with httpx.Client(base_url=ui.origin, timeout=10) as client:
        for path in ("/jobs/99999999999999999999", "/schedules/x%00y", "/schedules/%0A"):
            assert client.get(path).status_code == 404, path
        csrf = client.get("/jobs").text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        for path, data in [
            ("/jobs/99999999999999999999/retry", {}),
            ("/schedules/x%00y/pause", {}),
            ("/jobs/bulk", {"action": "retry", "ids": "99999999999999999999"}),
            (
                "/jobs/bulk",
                {"action": "retry", "scope": "all", "status": "failed", "floor": "1",
                 "max_id": "99999999999999999999", "expected": "1"},
            ),
        ]:  # fmt: skip
            response = client.post(path, data={"csrf": csrf, **data})
            assert response.status_code < 500 and "Traceback" not in response.text, path
