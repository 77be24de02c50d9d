"""One home per read model: ``pgbeat status --json`` and the dashboard, over one database
whose states are planted with SQL, give the same verdict for every schedule (its health,
latest period, next fire), for the fleet (live processes, the file in effect and the
replicas behind it, the kinds no worker claims, retention's turn), late periods included,
and for the job list and a job's page (error lines, run time, attempts, schedule).

scheduling/health.py, observe/fleet.py and jobs/reads.py decide; the faces only render.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest

import pgbeat
from pgbeat.cli.main import main as cli_main
from pgbeat.scheduling.state import pause_schedule
from tests.integration.ui_support import Dashboard, dashboard

SCHEDULE_ROW = re.compile(
    r'<tr id="schedule-([^"]+)" class="[^"]*" data-verdict="([^"]*)" '
    r'data-latest-due="([^"]*)" data-next-fire="([^"]*)" data-late="([^"]*)">'
)
PROCESS_ROW = re.compile(r'<tr id="process-(\d+)" data-process-live="(yes|no)"( class="behind")?')
UNSERVED = re.compile(r'<li><a href="[^"]*">([^<]+)</a> in queue ([^:]+): ([\d,]+) pending</li>')
HOLDER = re.compile(r'<span class="holder">([^<]*)</span>')
JOB_ROW = re.compile(
    r'<tr id="job-(\d+)" data-status="([a-z]+)">.*?<td class="err" data-label="Error">(.*?)</td>',
    re.S,
)
JOB_FIELDS = re.compile(
    r'<section id="job-fields" data-live data-status="([a-z]+)" data-schedule="([^"]*)" '
    r'data-run-seconds="([^"]*)">'
)
ATTEMPT_ROW = re.compile(
    r'<tr class="recorded" data-attempt="(\d+)" data-started="([^"]*)">.*?'
    r"(?:<summary>(.*?)</summary>.*?)?</td></tr>",
    re.S,
)


def _plant(conn: psycopg.Connection[Any]) -> None:
    """Schedules in every state, processes of a fleet in disagreement, an unserved kind."""
    pgbeat.upsert_schedule(
        conn, "enqueued", every="1h", catch_up_window="2h"
    )  # its periods have their jobs
    pgbeat.upsert_schedule(
        conn, "missing", every="1h", catch_up_window="2h"
    )  # created hours ago, no job since
    pgbeat.upsert_schedule(
        conn, "fresh", every="1h", catch_up_window="2h"
    )  # created now: nothing checked yet
    pgbeat.upsert_schedule(conn, "yearly", cron="0 0 1 1 *")  # its period is too old to check
    pgbeat.upsert_schedule(conn, "paused", every="1h", catch_up_window="2h")
    pgbeat.upsert_schedule(conn, "ended", every="1h", end_at="2020-01-01T00:00:00Z")
    pause_schedule(conn, "paused")
    conn.execute(
        "UPDATE pgbeat_schedules SET created_at = now() - interval '5 hours'"
        " WHERE name IN ('enqueued', 'missing', 'paused', 'ended')"
    )
    now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    for back in range(-1, 4):  # the periods around now, whichever is latest when read
        fire = hour - timedelta(hours=back)
        pgbeat.enqueue(
            conn, "enqueued", {}, unique_key=f"enqueued@{fire:%Y-%m-%dT%H:%M:%SZ}", run_at=fire
        )
    conn.execute(
        """
        INSERT INTO pgbeat_processes (id, role, host, pid, version, heartbeat_at,
                                      schedules_hash, details)
        VALUES ('w1', 'worker', 'h1', 101, 't', now(), NULL, '{"kinds": ["served", "enqueued"]}'),
               ('w2', 'worker', 'h2', 102, 't', now() - interval '5 minutes', NULL,
                '{"kinds": ["unserved"]}'),
               ('s1', 'scheduler', 'h1', 201, 't', now(), 'file-a', '{}'),
               ('s2', 'scheduler', 'h2', 202, 't', now(), 'file-b', '{}')"""
    )
    conn.execute(
        "INSERT INTO pgbeat_schedule_files (hash, applied_at, applied_by, schedules)"
        " VALUES ('file-a', now(), 'h1:201', '{}'), ('file-b', NULL, NULL, '{}')"
    )
    _plant_deadlines(conn)
    for kind in ("served", "unserved", "unserved"):
        pgbeat.enqueue(conn, kind, {})
    conn.execute(
        "UPDATE pgbeat_retention SET holder = 'h1:101', held_until = now() + interval '1 minute',"
        " last_run_at = now(), last_run_by = 'h1:101', last_deleted = 3"
    )


def _plant_deadlines(conn: psycopg.Connection[Any]) -> None:
    """A period found late, one overdue that no replica judged, one late and then met."""
    for name in ("late", "unjudged", "met"):  # created now: no period checked for a job
        pgbeat.upsert_schedule(conn, name, every="1h", deadline="10m")
    conn.execute(
        """
        INSERT INTO pgbeat_schedule_history (schedule, fire_at, outcome, due_by,
                                             deadline_state, late_at, late_status)
        SELECT name, now() - back, 'enqueued', now() - back + interval '10 minutes', state,
               CASE state WHEN 'late' THEN now() - back + interval '11 minutes' END,
               CASE state WHEN 'late' THEN 'failed' END
        FROM (VALUES ('late', interval '2 hours', 'met'), ('late', interval '1 hour', 'late'),
                     ('unjudged', interval '1 hour', 'watching'),
                     ('met', interval '2 hours', 'late'), ('met', interval '1 hour', 'met'))
             AS p (name, back, state)"""
    )


def _second(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(microsecond=0)


@pytest.fixture
def ui(database_url: str) -> Iterator[Dashboard]:
    with dashboard(database_url, read_only=True) as running:
        yield running


def _cli_status(
    database_url: str, capsys: pytest.CaptureFixture[str], code: int = 0
) -> dict[str, Any]:
    capsys.readouterr()
    assert cli_main(["status", "--json", "--database-url", database_url]) == code
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    return found


def test_the_cli_and_the_dashboard_give_the_same_verdicts(
    database_url: str,
    conn: psycopg.Connection[Any],
    ui: Dashboard,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _plant(conn)
    status = _cli_status(database_url, capsys, code=1)  # a late schedule fails the probe
    with httpx.Client(timeout=10) as client:
        schedules_page = client.get(f"{ui.url}/schedules").text
        processes_page = client.get(f"{ui.url}/processes").text
        overview = client.get(f"{ui.url}/").text
        late_page = client.get(f"{ui.url}/schedules/late").text
    cli_schedules = {
        r["schedule"]: (
            r["verdict"],
            _second(r["latest_due"]),
            _second(r["next_fire"]),
            _second(r["late_fire_at"]),
        )
        for r in status["schedules"]
    }
    ui_schedules = {
        name: (verdict, _second(due), _second(upcoming), _second(late))
        for name, verdict, due, upcoming, late in SCHEDULE_ROW.findall(schedules_page)
    }
    assert cli_schedules == ui_schedules
    late = {r["schedule"]: _second(r["fire_at"]) for r in status["late_schedules"]}
    assert late == {name: found[3] for name, found in cli_schedules.items() if found[3]}
    assert set(late) == {"late", "unjudged"}
    counted = re.search(r'class="status h-late"[^>]*>(\d+) late', overview)
    assert counted is not None and int(counted.group(1)) == len(late), overview
    assert 'h-late">period ' in late_page and "is late</strong>" in late_page
    assert cli_main(["status", "--database-url", database_url]) == 1  # the text renders it too
    text = capsys.readouterr().out
    assert re.search(r"^  late +last due .* LATE ", text, re.M), text
    assert "warning: schedule unjudged: period unjudged@" in text and "not judged yet" in text
    verdicts = {name: found[0] for name, found in cli_schedules.items()}
    assert verdicts == {
        "enqueued": "ok",
        "missing": "missing",
        "fresh": "ok",
        "yearly": "ok",
        "paused": "paused",
        "ended": "ended",
        "late": "late",
        "unjudged": "late",
        "met": "ok",
    }
    rows = PROCESS_ROW.findall(processes_page)
    assert {int(p["pid"]) for p in status["processes"]} == {
        int(pid) for pid, live, _ in rows if live == "yes"
    }
    behind = status["schedules_files"]["replicas_behind"]
    assert {r["pid"] for r in behind} == {int(pid) for pid, _, late in rows if late} == {202}
    assert status["schedules_files"]["replicas_disagree"] is True
    assert "Live schedulers run different schedules files" in processes_page
    unserved = [(u["kind"], u["queue"], u["pending"]) for u in status["unserved_kinds"]]
    shown = [(k, q, int(n.replace(",", ""))) for k, q, n in UNSERVED.findall(processes_page)]
    assert unserved == shown == [("unserved", "default", 2)]
    holder = HOLDER.search(processes_page)
    assert holder is not None
    assert html.unescape(holder.group(1)) == status["retention"]["holder"] == "h1:101"


def test_a_time_without_an_offset_is_read_in_the_schedules_zone_by_every_face(
    database_url: str,
    conn: psycopg.Connection[Any],
    ui: Dashboard,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The CLI's backfill and the dashboard's backfill preview read ``2026-11-01T00:00``
    for a Berlin schedule as midnight in Berlin (23:00 UTC the day before)."""
    pgbeat.upsert_schedule(conn, "berlin", cron="0 * * * *", timezone="Europe/Berlin")
    bounds = ("2026-11-01T00:00", "2026-11-01T03:00")
    capsys.readouterr()
    argv = ["schedules", "backfill", "berlin", "--from", bounds[0], "--to", bounds[1]]
    assert cli_main([*argv, "--dry-run", "--database-url", database_url]) == 0
    printed = capsys.readouterr().out
    assert "would enqueue 3 periods" in printed
    assert "2026-10-31 23:00:00Z" in printed
    with httpx.Client(timeout=10) as client:
        params = {"bf_from": bounds[0], "bf_to": bounds[1]}
        page = client.get(f"{ui.url}/schedules/berlin", params=params).text
    assert "Would enqueue <strong>3</strong> periods" in page
    assert "2026-10-31 23:00:00Z" in page
    with pytest.raises(SystemExit):  # a time about no schedule: refused, one line
        cli_main(["enqueue", "k", "--at", bounds[0], "--database-url", database_url])
    assert "has no UTC offset" in capsys.readouterr().err


def _plant_jobs(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Jobs in every state a face tells apart, by SQL: a schedule's done period with its run
    time, a failed job with a traceback and recorded attempts, a look-alike key of no
    schedule, and a row with a value Python cannot hold."""
    pgbeat.upsert_schedule(conn, "nightly", every="1d")
    ids: dict[str, int] = {}
    for name, key in (
        ("period", "nightly@2026-01-01T00:00:00Z"),
        ("failed", None),
        ("ghost", "ghost@2026-01-01T00:00:00Z"),
        ("endless", None),
    ):
        job_id = pgbeat.enqueue(conn, f"k_{name}", {}, unique_key=key)
        assert job_id is not None
        ids[name] = job_id
    conn.execute(
        "UPDATE jobs SET status = 'done', attempts = 1, started_at = now() - interval '2.5 s',"
        " finished_at = now() WHERE id = %s",
        (ids["period"],),
    )
    conn.execute(
        "UPDATE jobs SET status = 'failed', attempts = 2, finished_at = now(),"
        " last_error = E'ValueError: boom\\n  File \"x.py\", line 1' WHERE id = %s",
        (ids["failed"],),
    )
    conn.execute(
        "INSERT INTO pgbeat_job_attempts (job_id, attempt, outcome, finished_at, duration_s,"
        " worker, error) VALUES (%(id)s, 1, 'retry', now() - interval '1 minute', 1.5, 'w1',"
        " E'OSError: first\\nmore'), (%(id)s, 2, 'failed', now(), 'NaN', 'w1',"
        " E'ValueError: boom\\n  File')",
        {"id": ids["failed"]},
    )
    conn.execute("UPDATE jobs SET created_at = 'infinity' WHERE id = %s", (ids["endless"],))
    return ids


def test_the_cli_and_the_dashboard_list_and_show_the_same_jobs(
    database_url: str,
    conn: psycopg.Connection[Any],
    ui: Dashboard,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids = _plant_jobs(conn)
    capsys.readouterr()
    assert cli_main(["jobs", "list", "--json", "--database-url", database_url]) == 0
    listed = json.loads(capsys.readouterr().out)
    with httpx.Client(timeout=10) as client:
        jobs_page = client.get(f"{ui.url}/jobs").text
        pages = {name: client.get(f"{ui.url}/jobs/{job_id}").text for name, job_id in ids.items()}
    cli_rows = [(r["id"], r["status"], r["error_line"]) for r in listed]
    ui_rows = [(int(i), st, html.unescape(err)) for i, st, err in JOB_ROW.findall(jobs_page)]
    assert cli_rows == ui_rows
    assert cli_rows == [
        (ids["endless"], "pending", ""),
        (ids["ghost"], "pending", ""),
        (ids["failed"], "failed", "ValueError: boom"),
        (ids["period"], "done", ""),
    ]
    assert [sorted(r.get("unreadable", {})) for r in listed] == [["created_at"], [], [], []]
    for name, job_id in ids.items():
        shown = json.loads(_show(database_url, job_id, capsys))
        fields = JOB_FIELDS.search(pages[name])
        assert fields is not None, pages[name]
        status, schedule, run_seconds = fields.groups()
        assert (shown["status"], shown["schedule"] or "") == (status, schedule), name
        assert shown["run_seconds"] == (float(run_seconds) if run_seconds else None), name
        cli_attempts = [
            (a["attempt"], _second(a["started_at"]), a["error_line"])
            for a in shown["recorded_attempts"]
        ]
        ui_attempts = [
            (int(n), _second(started), html.unescape(error or ""))
            for n, started, error in ATTEMPT_ROW.findall(pages[name])
        ]
        assert cli_attempts == ui_attempts, name
    period = json.loads(_show(database_url, ids["period"], capsys))
    assert (period["schedule"], period["run_seconds"]) == ("nightly", 2.5)
    failed = json.loads(_show(database_url, ids["failed"], capsys))
    assert failed["schedule"] is None and failed["run_seconds"] is None
    first, second = failed["recorded_attempts"]
    assert (first["error_line"], second["error_line"]) == ("OSError: first", "ValueError: boom")
    assert first["started_at"] is not None and second["started_at"] is None  # NaN: no start
    assert json.loads(_show(database_url, ids["ghost"], capsys))["schedule"] is None


def _show(database_url: str, job_id: int, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli_main(["jobs", "show", str(job_id), "--json", "--database-url", database_url]) == 0
    return capsys.readouterr().out
