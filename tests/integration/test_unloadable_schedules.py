"""A pgbeat_schedules row that Python cannot hold, or a definition edited with SQL under its old
hash, stops no scheduler replica, no page and no command; the replicas agree on what runs.

Rows are written with plain SQL, as a careless (or hostile) operator would.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any, LiteralString

import httpx
import psycopg
import pytest

import pgbeat
from pgbeat.scheduling import state
from pgbeat.scheduling.scheduler import Scheduler
from tests.helpers import run_cli_here
from tests.integration.ui_support import dashboard

Conn = psycopg.Connection[Any]

# One column each that psycopg cannot decode (and a payload json cannot), by SQL.
SET = "UPDATE pgbeat_schedules SET "
BAD_ROWS: dict[str, LiteralString] = {
    "created_infinity": SET + "created_at = 'infinity' WHERE name = %s",
    "paused_minus_infinity": SET + "paused_at = '-infinity', resumed_at = now() WHERE name = %s",
    "huge_every": SET + "every = interval '1000000000 days' WHERE name = %s",
    "huge_window": SET + "catch_up_window = interval '170000000 years' WHERE name = %s",
    "deep_payload": SET + "payload = (repeat('[', 5000) || repeat(']', 5000))::jsonb "
    "WHERE name = %s",
    "bc_resumed": SET + "resumed_at = '0001-01-01 00:00:00+14' WHERE name = %s",
    "array_payload": SET + "payload = '[1, 2]'::jsonb WHERE name = %s",  # not an object
}


def _plant(conn: Conn, name: str, change: LiteralString) -> None:
    """A valid schedule from code, then one column made unreadable with SQL."""
    pgbeat.upsert_schedule(conn, name, every="1s", kind="bad", catch_up="none")
    conn.execute(change, (name,))


def _now(conn: Conn) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    value: datetime = row[0]
    return value


@pytest.mark.parametrize("name", sorted(BAD_ROWS))
def test_a_bad_row_is_skipped_by_name_at_start_and_at_refresh(
    conn: Conn, database_url: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    pgbeat.upsert_schedule(conn, "good", every="1s", kind="good", catch_up="none")
    running = Scheduler(database_url, None, heartbeat=False)
    running.tick(conn, _now(conn))  # started before the row went bad
    _plant(conn, name, BAD_ROWS[name])
    caplog.set_level(logging.WARNING, "pgbeat.scheduler")
    later = _now(conn) + timedelta(seconds=2)
    assert any(k.startswith("good@") for k in running.tick(conn, later).inserted)  # refresh
    assert name in running.catalog.invalid and name not in running.catalog
    starting = Scheduler(database_url, None, heartbeat=False)
    result = starting.tick(conn, later + timedelta(seconds=1))  # start
    assert any(k.startswith("good@") for k in result.inserted)
    assert name in starting.catalog.invalid and "good" in starting.catalog
    lines = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert lines and all("\n" not in line for line in lines), lines
    assert not conn.execute("SELECT 1 FROM jobs WHERE kind = 'bad'").fetchall()


def test_list_schedules_the_cli_and_the_pages_show_bad_rows_as_broken(
    conn: Conn, database_url: str
) -> None:
    pgbeat.upsert_schedule(conn, "good", every="1m", kind="good")
    for name, change in BAD_ROWS.items():
        _plant(conn, name, change)
    found = {s.name: s for s in state.list_schedules(conn)}
    assert found["good"].schedule is not None
    for name in BAD_ROWS:
        assert found[name].schedule is None and found[name].problem, name
    assert "created_at" in (found["created_infinity"].problem or "")
    single = state.get_schedule(conn, "created_infinity")
    assert single is not None and single.schedule is None
    listed = run_cli_here(["schedules", "list"], database_url)
    assert listed.returncode == 0, listed.stderr
    assert "good" in listed.stdout and "created_infinity" in listed.stdout
    as_json = run_cli_here(["schedules", "list", "--json"], database_url)
    assert as_json.returncode == 0 and '"problem": "created_at cannot be read' in as_json.stdout
    assert state.resume_schedule(conn, "paused_minus_infinity") in (True, False)
    with dashboard(database_url) as ui, httpx.Client(base_url=ui.origin, timeout=10) as client:
        for page in ("", "/schedules"):
            response = client.get(f"{ui.url}{page}")
            assert response.status_code == 200, (page, response.text[:500])
        assert "do not validate" in response.text  # the schedules page names the broken


def test_a_definition_edited_without_its_hash_runs_alike_on_every_replica(
    conn: Conn, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An old replica follows the edit; a new one loads it: no union of two definitions."""
    pgbeat.upsert_schedule(conn, "edited", every="1m", kind="edited", catch_up="none")
    old = Scheduler(database_url, None, heartbeat=False)
    old.tick(conn, _now(conn))
    conn.execute("UPDATE pgbeat_schedules SET every = '7 seconds' WHERE name = 'edited'")
    caplog.set_level(logging.WARNING, "pgbeat.scheduler")
    now = _now(conn)
    old.tick(conn, now)
    new = Scheduler(database_url, None, heartbeat=False)
    new.tick(conn, now)
    for replica in (old, new):
        member = replica.catalog.member("edited")
        assert member is not None
        group = replica.catalog._group_of["edited"]
        assert group.policy.every == timedelta(seconds=7), group.policy
    assert any("definition_hash did not" in r.getMessage() for r in caplog.records)
    # Both replicas tick for two minutes of the database clock: only the 7 s grid is enqueued.
    start = now + timedelta(seconds=1)
    for step in range(0, 120, 3):
        at = start + timedelta(seconds=step)
        old.tick(conn, at, refresh=False)
        new.tick(conn, at, refresh=False)
    keys = [row[0] for row in conn.execute("SELECT unique_key FROM jobs WHERE kind = 'edited'")]
    fires = [datetime.fromisoformat(key.partition("@")[2]) for key in keys]
    assert fires and all(fire.timestamp() % 7 == 0 for fire in fires), keys
    assert len(set(fires)) == len(fires)


# Names the model refuses, each on a copy of one valid row (so the copies share its
# definition, which a replica validates once): only the name can make them invalid.
BAD_NAMES = ("not a name", "x" * 201, "..", "semi;colon", "")


def test_rows_alike_but_for_their_names_are_each_checked_by_name(
    conn: Conn, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    pgbeat.upsert_schedule(conn, "alike_1", every="1s", kind="alike", catch_up="none")
    copy: LiteralString = (
        "INSERT INTO pgbeat_schedules SELECT (jsonb_populate_record(NULL::pgbeat_schedules,"
        " to_jsonb(s) || jsonb_build_object('name', %s::text))).*"
        " FROM pgbeat_schedules AS s WHERE name = 'alike_1'"
    )
    for name in ("alike_2", "x" * 200, *BAD_NAMES):
        conn.execute(copy, (name,))
    caplog.set_level(logging.WARNING, "pgbeat.scheduler")
    replica = Scheduler(database_url, None, heartbeat=False)
    result = replica.tick(conn, _now(conn) + timedelta(seconds=2))
    assert sorted(replica.catalog.names()) == sorted(["alike_1", "alike_2", "x" * 200])
    assert sorted(replica.catalog.invalid) == sorted(BAD_NAMES)
    assert all(replica.catalog.invalid[name].startswith("name") for name in BAD_NAMES)
    assert {key.partition("@")[0] for key in result.inserted} == {"alike_1", "alike_2", "x" * 200}
    # Alike rows join one group: one timing, one template, three members.
    groups = {id(replica.catalog._group_of[name]) for name in replica.catalog.names()}
    assert len(groups) == 1 and len(replica.catalog.templates.by_number) == 1
