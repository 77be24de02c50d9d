"""Real `pgbeat scheduler` replicas and their files: two versions at once, SIGHUP reloads.

The rule: among the files of live replicas, the newest (first seen last) is in effect; a
replica with an older file leaves the table alone, and `pgbeat status` names it.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.scheduler import Scheduler
from pgbeat.scheduling.sync import needs_sync
from tests.helpers import CliProcess, run_cli, schedules_toml, start_cli, wait_for

V1 = '[schedules.beat]\nevery = "1s"\ncatch_up = "none"\n\n[schedules.old_only]\nevery = "1h"\n'
V2 = '[schedules.beat]\nevery = "1s"\ncatch_up = "none"\npayload = { v = 2 }\n\n[schedules.new_only]\nevery = "1h"\n'  # noqa: E501


def live_names(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute("SELECT name FROM pgbeat_schedules WHERE deleted_at IS NULL ORDER BY 1")
    return [row[0] for row in rows]


def beats_after(conn: psycopg.Connection[Any], moment: Any) -> list[tuple[Any, ...]]:
    """The payloads of the periods of 'beat' that fired a second or more after ``moment``."""
    return conn.execute(
        "SELECT payload FROM jobs WHERE kind = 'beat' AND run_at >= %s + interval '1s'",
        (moment,),
    ).fetchall()


def registered(conn: psycopg.Connection[Any], *replicas: CliProcess) -> bool:
    pids = {row[0] for row in conn.execute("SELECT pid FROM pgbeat_processes")}
    return {r.pid for r in replicas} <= pids


def scheduler(path: Path, url: str) -> CliProcess:
    return start_cli(["scheduler", "--schedules", str(path), "--log-level", "INFO"], url)


@pytest.mark.slow
def test_two_replicas_with_two_files_do_not_fight(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    old, new = tmp_path / "v1.toml", tmp_path / "v2.toml"
    old.write_text(V1)
    new.write_text(V2)
    a = scheduler(old, database_url)
    b: CliProcess | None = None
    restarted: CliProcess | None = None
    try:
        wait_for(lambda: live_names(conn) == ["beat", "old_only"], timeout=20, message="v1")
        b = scheduler(new, database_url)
        wait_for(lambda: live_names(conn) == ["beat", "new_only"], timeout=20, message="v2")
        wait_for(lambda: registered(conn, a, b), timeout=20, message="both heartbeats")
        status = run_cli(["status"], database_url)
        warning = [line for line in status.stdout.splitlines() if "schedules file" in line]
        assert len(warning) == 1 and f":{a.pid} " in warning[0] and f":{b.pid} " not in warning[0]
        # the old replica restarted (same old file) does not undo the newer file
        a.kill()
        a.wait(10)
        restarted = scheduler(old, database_url)
        wait_for(lambda: "older than" in restarted.output(), timeout=20, message="deferring")
        assert live_names(conn) == ["beat", "new_only"]
        # every period since the newer file took effect has its payload, the old replica's too
        restarted_at = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        wait_for(lambda: beats_after(conn, restarted_at), timeout=10, message="later periods")
        applied_at = conn.execute("SELECT max(applied_at) FROM pgbeat_schedule_files").fetchone()
        assert applied_at is not None
        payloads = {row[0].get("v") for row in beats_after(conn, applied_at[0])}
        assert payloads == {2}
        # once no live replica holds the newer file, the remaining one takes over
        b.stop(signal.SIGTERM)
        wait_for(lambda: live_names(conn) == ["beat", "old_only"], timeout=20, message="rollback")
    finally:
        outputs = [p.stop() for p in (a, b, restarted) if p is not None]
    assert not any("Traceback" in out for out in outputs), outputs
    keys = conn.execute("SELECT count(*), count(DISTINCT unique_key) FROM jobs").fetchone()
    assert keys is not None and keys[0] == keys[1]


@pytest.mark.slow
def test_sighup_reloads_the_file_and_a_bad_file_changes_nothing(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = schedules_toml(tmp_path, V1)
    replica = scheduler(path, database_url)
    try:
        wait_for(lambda: live_names(conn) == ["beat", "old_only"], timeout=20, message="start")
        path.write_text(V2)
        replica.send_signal(signal.SIGHUP)
        wait_for(lambda: live_names(conn) == ["beat", "new_only"], timeout=10, message="reload")
        wait_for(
            lambda: (
                conn.execute(
                    "SELECT count(*) FROM jobs WHERE kind = 'beat' AND payload = '{\"v\": 2}'"
                ).fetchone()
                != (0,)
            ),
            timeout=10,
            message="a period of the reloaded definition",
        )
        path.write_text('[schedules.beat]\nevery = "soon"\n')
        replica.send_signal(signal.SIGHUP)
        wait_for(lambda: "reload refused" in replica.output(), timeout=10, message="refusal")

        def count() -> int:
            row = conn.execute("SELECT count(*) FROM jobs").fetchone()
            assert row is not None
            return int(row[0])

        before = count()
        wait_for(lambda: count() >= before + 2, timeout=10, message="periods after the refusal")
        assert live_names(conn) == ["beat", "new_only"]
        assert replica.returncode is None
    finally:
        output = replica.stop()
    refusals = [line for line in output.splitlines() if "reload refused" in line]
    assert len(refusals) == 1 and "every" in refusals[0], output
    assert "Traceback" not in output


def test_a_replica_holds_its_file_before_the_file_is_in_effect(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    """A replica checking the live files right after a newer file's sync (before that
    replica's next beat) must see the newer file held, or it applies its older file back."""
    old, new = tmp_path / "v1.toml", tmp_path / "v2.toml"
    old.write_text(V1)
    new.write_text(V2)
    a = Scheduler(database_url, load_schedules(old))
    b = Scheduler(database_url, load_schedules(new))
    with psycopg.connect(database_url, autocommit=True) as mine:
        now = mine.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
        a.tick(mine, now)
        assert live_names(conn) == ["beat", "old_only"]
        b.tick(mine, now)  # b's start: its sync, and no beat of the loop's yet
        assert live_names(conn) == ["beat", "new_only"]
        assert a._file_hash is not None
        assert not needs_sync(mine, a._file_hash, replica=a.replica)
        held = mine.execute(
            "SELECT schedules_hash FROM pgbeat_processes WHERE id = %s", (b.replica,)
        ).fetchone()
        assert held == (b._file_hash,)
