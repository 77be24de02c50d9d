"""The performance view and the processes page over real HTTP, on a database of known jobs,
and a real worker process whose running jobs the processes page counts.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.types.json import Jsonb

import pgbeat
from pgbeat.ui.timefmt import duration_text
from tests.helpers import PROCESS_START, running_worker, start_cli, wait_for
from tests.integration.ui_support import Dashboard, dashboard, fresh_database, sync_schedules

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.apps.jobs_app:registry"

# kind "fast": four done jobs, started 0.5 s after due and finished 1.5 s later, one
# attempt each.
# kind "flaky": two done after one retry each (attempts of 1 s and 3 s, last runs of 2 s and
# 4 s, started 58 s and 56 s after due), one failed after three attempts (0.5, 1.5, 2.5 s;
# its last run started 117.5 s after due), a release (not a duration), and one cancelled
# while pending whose start is an earlier run's (counted in neither durations nor waits).
# kind "old": done two days ago, before starts were recorded, so only in the 7 d window.
SEED = """
INSERT INTO jobs (kind, payload, status, attempts, run_at, started_at, finished_at)
SELECT 'fast', '{}', 'done', 1, now() - interval '10 min',
       now() - interval '10 min' + interval '0.5 s', now() - interval '10 min' + interval '2 s'
FROM generate_series(1, 4);
INSERT INTO jobs (kind, payload, status, attempts, run_at, started_at, finished_at) VALUES
  ('flaky', '{}', 'done', 2, now() - interval '5 min', now() - interval '4 min 2 s',
   now() - interval '4 min'),
  ('flaky', '{}', 'done', 2, now() - interval '5 min', now() - interval '4 min 4 s',
   now() - interval '4 min'),
  ('flaky', '{}', 'failed', 3, now() - interval '5 min', now() - interval '3 min 2.5 s',
   now() - interval '3 min'),
  ('flaky', '{}', 'cancelled', 0, now() - interval '5 min', now() - interval '1 hour',
   now() - interval '3 min'),
  ('old', '{}', 'done', 1, now() - interval '2 days', NULL, now() - interval '2 days');
INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome, duration_s)
SELECT id, 1, 'retry', CASE WHEN id = (SELECT min(id) FROM jobs WHERE kind = 'flaky')
                            THEN 1.0 ELSE 3.0 END
FROM jobs WHERE kind = 'flaky' AND status = 'done';
INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome, duration_s)
SELECT id, a.n, CASE WHEN a.n < 3 THEN 'retry' ELSE 'failed' END, a.d
FROM jobs, (VALUES (1, 0.5), (2, 1.5), (3, 2.5)) AS a(n, d)
WHERE kind = 'flaky' AND status = 'failed';
INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome, duration_s)
SELECT id, 1, 'released', 99.0 FROM jobs WHERE kind = 'flaky' AND status = 'failed';
"""


@pytest.fixture(scope="module")
def database(server_url: str, template_name: str) -> Iterator[str]:
    with fresh_database(server_url, template_name) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SEED)
        yield url


@pytest.fixture(scope="module")
def ui(database: str) -> Iterator[Dashboard]:
    with dashboard(database, refresh_seconds=0) as running:
        yield running


class Tables(HTMLParser):
    """The text of every table cell, table by table, row by row."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(re.sub(r"\s+", " ", "".join(self._cell)).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def performance_rows(ui: Dashboard, query: str) -> dict[str, list[str]]:
    response = httpx.get(f"{ui.url}/performance?{query}", timeout=10)
    assert response.status_code == 200, response.text
    [*_charts, table] = Tables(response.text).tables
    header, *body = table
    assert header[0].startswith("Kind")
    return {row[0]: row[1:] for row in body}


def test_per_kind_counts_failure_rate_retries_and_timings_over_the_last_hour(
    ui: Dashboard,
) -> None:
    rows = performance_rows(ui, "window=1h")
    assert set(rows) == {"fast", "flaky"}
    # finished, failure rate, retries, duration p50 / p95 / max, wait p50 / p95
    assert rows["fast"] == ["4", "0 %", "0", "1.5s", "1.5s", "1.5s", "500ms", "500ms"]
    # durations 0.5, 1, 1.5, 2, 2.5, 3, 4 (the done jobs' last runs are two of them, the
    # release none): p95 interpolates to 3.7 s. Waits 56, 58, 117.5 s: p95 111.55 s.
    assert rows["flaky"] == ["4", "33 % (1)", "4", "2.0s", "3.7s", "4.0s", "58.0s", "1m51s"]


def test_the_week_includes_older_jobs_and_each_column_sorts(ui: Dashboard) -> None:
    assert list(performance_rows(ui, "window=7d")) == ["fast", "flaky", "old"]
    assert list(performance_rows(ui, "window=7d&sort=kind")) == ["fast", "flaky", "old"]
    assert list(performance_rows(ui, "window=7d&sort=kind&order=desc")) == ["old", "flaky", "fast"]
    # Larger first by default; kinds with no value come last in either order.
    assert list(performance_rows(ui, "window=7d&sort=retries")) == ["flaky", "fast", "old"]
    assert list(performance_rows(ui, "window=7d&sort=duration_p95&order=asc")) == [
        "fast",
        "flaky",
        "old",
    ]
    assert list(performance_rows(ui, "window=7d&sort=wait_p95")) == ["flaky", "fast", "old"]
    # Jobs finished before starts were recorded count in neither durations nor waits.
    assert performance_rows(ui, "window=7d")["old"][3:] == ["-"] * 5
    page = httpx.get(f"{ui.url}/performance?window=7d&sort=retries", timeout=10).text
    assert 'aria-sort="descending"' in page
    assert "sort=retries&amp;order=asc" in page  # the active heading's link reverses it


@pytest.mark.parametrize(
    ("query", "message"),
    [("window=2d", "window: 1h, 24h or 7d"), ("sort=nope", "sort: one of"), ("order=up", "order")],
)
def test_bad_parameters_are_refused_with_a_reason(ui: Dashboard, query: str, message: str) -> None:
    response = httpx.get(f"{ui.url}/performance?{query}", timeout=10)
    assert response.status_code == 400
    assert message in response.text


def test_a_kinds_page_draws_its_charts_with_their_numbers_in_tables(ui: Dashboard) -> None:
    response = httpx.get(f"{ui.url}/performance/flaky?window=1h", timeout=10)
    assert response.status_code == 200
    html = response.text
    assert html.count('<svg class="chart"') == 3
    assert "Jobs finished per 5 minutes (jobs per 5 minutes): done 2, failed 1" in html
    assert "Run duration" in html and "Queue wait (due to started)" in html
    tables = Tables(html).tables
    outcomes, durations, wait = tables
    assert len(outcomes) == 1 + 12 and outcomes[-1][1:] == ["2", "1"]
    assert durations[0] == ["UTC, newest right", "p50", "p95"]
    assert durations[-1][1:] == ["2.0s", "3.7s"]
    assert wait[0] == ["UTC, newest right", "p50", "p95"]
    assert wait[-1][1:] == ["58.0s", "1m51s"]


def test_the_overview_charts_the_last_hour_per_minute_and_the_last_day_per_hour(
    ui: Dashboard,
) -> None:
    overview = httpx.get(f"{ui.url}/", timeout=10).text
    assert "Jobs finished per minute, last hour (jobs per minute): done 6, failed 1" in overview
    assert 'class="axis-title"' in overview and "Numbers of this chart" in overview
    for page in (overview, httpx.get(f"{ui.url}/performance?window=24h", timeout=10).text):
        assert "Jobs finished per hour, last 24 hours (jobs per hour)" in page
        assert "done or cancelled 7, failed 1" in page
    # A live refresh replaces the per-minute chart only, so it skips the 24 hours' counts.
    assert '<figure class="chart-box" id="per-minute" data-live>' in overview
    assert '<figure class="chart-box" id="per-hour">' in overview
    live = httpx.get(f"{ui.url}/", headers={"X-Pgbeat-Live": "1"}, timeout=10).text
    assert 'id="per-minute" data-live' in live and 'id="per-hour"' not in live


def test_a_real_workers_run_shows_its_duration_and_its_wait(
    server_url: str, template_name: str
) -> None:
    registry = pgbeat.Registry()

    @registry.handler("timed")
    def timed(payload: Any, job: pgbeat.JobContext) -> None:
        time.sleep(0.25)  # the work whose duration the view shows

    with fresh_database(server_url, template_name) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            job_id = pgbeat.enqueue(conn, "timed", {}, run_at=datetime.now(UTC) - timedelta(1))

            def done() -> bool:
                found = conn.execute("SELECT status FROM jobs WHERE id = %s", (job_id,))
                return found.fetchone() == ("done",)

            with running_worker(url, registry, heartbeat=False):
                wait_for(done, timeout=15, message="the job done")
            row = conn.execute(
                "SELECT extract(epoch FROM finished_at - started_at)::float8,"
                " extract(epoch FROM started_at - run_at)::float8, started_at > created_at"
                " FROM jobs WHERE id = %s",
                (job_id,),
            ).fetchone()
        assert row is not None
        duration, wait, claimed_after_insert = row
        assert duration >= 0.25 and wait >= 86400 and claimed_after_insert
        with dashboard(url, refresh_seconds=0) as ui:
            figures = performance_rows(ui, "window=1h")["timed"]
    assert figures[3:] == [duration_text(duration)] * 3 + [duration_text(wait)] * 2
    assert figures[3].endswith("ms") and figures[6].startswith("1d")


SCHEDULER_FILES = """
INSERT INTO pgbeat_schedule_files (hash, first_seen_by, applied_at, applied_by, schedules)
VALUES ('aaaa1111bbbb2222', 'sched-a', now(), 'sched-a', '{one,two}'),
       ('cccc3333dddd4444', 'sched-b', NULL, NULL, '{one}');
INSERT INTO pgbeat_processes (id, role, host, pid, version, schedules_hash) VALUES
  ('sched-a', 'scheduler', 'host-a', 101, '1.0', 'aaaa1111bbbb2222'),
  ('sched-b', 'scheduler', 'host-b', 102, '1.0', 'cccc3333dddd4444');
"""


def test_processes_show_each_schedulers_file_and_whether_it_is_in_effect(
    ui: Dashboard, database: str
) -> None:
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(SCHEDULER_FILES)
        conn.execute(
            "INSERT INTO pgbeat_processes (id, role, host, pid, version, details)"
            " VALUES ('w', 'worker', 'host-w', 103, '1.0', %s)",
            (Jsonb({"concurrency": 4, "kinds": ["fast"], "queues": ["mail"], "running": 2}),),
        )
    try:
        html = httpx.get(f"{ui.url}/processes", timeout=10).text
        workers, schedulers = Tables(html).tables
        assert workers[1][:7] == ["host-w", "103", "1.0", "4", "2 of 4", "mail", "fast"]
        assert 'href="/queues#queue-mail"' in html and 'href="/performance/fast"' in html
        by_host = {row[0]: row for row in schedulers[1:]}
        assert by_host["host-a"][3:5] == ["aaaa1111bbbb", "yes"]
        assert by_host["host-b"][3:5] == ["cccc3333dddd", "no"]
        assert "File in effect: aaaa1111bbbb, 2 schedules" in re.sub(r"<[^>]+>", "", html)
        assert "Live schedulers run different schedules files" in html
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute("DELETE FROM pgbeat_processes")


@pytest.mark.slow
def test_a_real_workers_running_jobs_show_on_the_processes_page(
    server_url: str, template_name: str
) -> None:
    with fresh_database(server_url, template_name) as url:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE effects (job_id bigint PRIMARY KEY, pid int NOT NULL);"
                "CREATE TABLE executions (job_id bigint, pid int, at timestamptz DEFAULT now())"
            )
            conn.execute(
                "INSERT INTO jobs (kind, payload) SELECT 'effect', '{\"sleep\": 30}'"
                " FROM generate_series(1, 2)"
            )
        worker = start_cli(["worker", APP, "--concurrency", "3"], url, cwd=str(ROOT))
        try:
            with dashboard(url) as ui:

                def running_now() -> bool:
                    html = httpx.get(f"{ui.url}/processes", timeout=10).text
                    rows = Tables(html).tables[0][1:]  # "No worker has registered" has 1 cell
                    return any(len(row) > 4 and row[4] == "2 of 3" for row in rows)

                wait_for(
                    running_now,
                    timeout=PROCESS_START,
                    interval=0.5,
                    message="the worker's two running jobs",
                )
        finally:
            worker.kill()
            worker.wait(10)


def test_each_overview_card_links_to_its_filtered_list_with_the_same_count(
    ui: Dashboard,
) -> None:
    overview = httpx.get(f"{ui.url}/", timeout=10).text
    cards = re.findall(
        r'<li><a href="([^"]+)"><span class="num"[^>]*>([\d,+]+)</span> ([a-z ]+\d* ?h?)</a>',
        overview,
    )
    assert [label for _, _, label in cards] == [
        "due",
        "scheduled for later",
        "running",
        "failed",
        "done in 24 h",
    ]
    for link, number, label in cards:
        listed = httpx.get(ui.origin + link.replace("&amp;", "&"), timeout=10).text
        match = re.search(r'<span id="match-count">([\d,+]+)</span>', listed)
        assert match is not None and match.group(1) == number, (label, link)


def test_words_agree_with_their_numbers_and_no_action_offers_zero_jobs(
    ui: Dashboard, database: str
) -> None:
    failures = httpx.get(f"{ui.url}/failures?window=1h", timeout=10).text
    assert "1 failed job in the last 1h" in failures
    nothing = httpx.get(f"{ui.url}/jobs?status=failed&kind=no_such_kind", timeout=10).text
    assert "No jobs match" in nothing and "Retry all" not in nothing
    some = httpx.get(f"{ui.url}/jobs?status=failed", timeout=10).text
    assert "Retry all 1 matching…" in some
    kind = httpx.get(f"{ui.url}/performance/old?window=7d", timeout=10).text
    assert "1 job done or failed in the last 7d" in kind


def test_a_schedules_default_max_attempts_is_the_number_and_one_schedule_is_singular(
    ui: Dashboard, database: str, tmp_path: Path
) -> None:
    path = tmp_path / "schedules.toml"
    path.write_text('[schedules.only]\ncron = "0 3 * * *"\n')
    sync_schedules(database, path)
    listing = httpx.get(f"{ui.url}/schedules", timeout=10).text
    assert '<h2 id="sched-h" class="sr">1 schedule</h2>' in listing
    page = re.sub(r"<[^>]+>", "", httpx.get(f"{ui.url}/schedules/only", timeout=10).text)
    assert re.search(r"Max attempts\s*8 \(the default\)", page)
