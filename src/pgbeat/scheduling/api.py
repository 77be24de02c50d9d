"""Schedules created from code: ``pgbeat.upsert_schedule`` and ``pgbeat.delete_schedule``.

Each call is a short plan of statements on the caller's connection, inside the caller's
transaction (db/runner.py drives it, sync or async): a schedule created with a customer's
row commits or rolls back with it. Values are validated exactly as a schedules file's are,
before anything is sent. Running scheduler replicas pick the change up at commit (a NOTIFY
wakes them; they also poll), without a restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

import psycopg

from pgbeat.db import runner
from pgbeat.db.runner import Plan
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.errors import ConfigError, ScheduleConflict, ScheduleError
from pgbeat.jobs import payloads
from pgbeat.scheduling.definition import schedule_values
from pgbeat.scheduling.file import build_schedule
from pgbeat.scheduling.schedule import CatchUp, Overlap, Schedule

Change = Literal["created", "updated", "unchanged"]
WRITER = "api"  # updated_by of rows written from code


@runner.async_aware("upsert_schedule_async")
def upsert_schedule(
    conn: psycopg.Connection[Any],
    name: str,
    *,
    cron: str | None = None,
    every: str | timedelta | None = None,
    timezone: str = "UTC",
    kind: str | None = None,
    payload: Any = None,
    max_attempts: int | None = None,
    catch_up: CatchUp | None = None,
    catch_up_window: str | timedelta | None = None,
    overlap: Overlap = "allow",
    jitter: str | timedelta | None = None,
    start_at: str | datetime | None = None,
    end_at: str | datetime | None = None,
    pause_after_failures: int | None = None,
    queue: str = "default",
    priority: int = 0,
    tags: Sequence[str] | None = None,
    deadline: str | timedelta | None = None,
    on_late: str | None = None,
) -> Change:
    """Create or change the schedule ``name`` on ``conn``, in its current transaction.

    Returns ``"created"``, ``"updated"`` or ``"unchanged"``; an async connection returns the
    coroutine of ``upsert_schedule_async``. Durations are written as in
    schedules.toml (``"30s"``, ``"1h30m"``) or given as ``timedelta``; ``kind`` defaults to
    the name, ``catch_up`` to ``"latest"`` within ``catch_up_window`` (``"1h"``). Pause state
    survives a change. ``start_at`` / ``end_at`` (aware datetimes or ISO-8601 text with an
    offset) bound its periods; ``pause_after_failures`` pauses it after that many
    consecutive periods whose jobs ended failed; ``queue``, ``priority`` and ``tags`` go to
    its jobs. ``deadline`` (``"30m"``): a period whose job has not ended done that long
    after its fire time is late, once; ``on_late`` names the kind of the one job enqueued
    for each late period (docs/schedules.md, "Deadlines and alerts").
    Raises ``ScheduleError`` (one line) for an invalid value, and
    ``ScheduleConflict`` when a schedules file declares ``name``: change it there.
    """
    return runner.run(conn, _upsert_plan(_validated(locals())))


async def upsert_schedule_async(
    conn: object,
    name: str,
    *,
    cron: str | None = None,
    every: str | timedelta | None = None,
    timezone: str = "UTC",
    kind: str | None = None,
    payload: Any = None,
    max_attempts: int | None = None,
    catch_up: CatchUp | None = None,
    catch_up_window: str | timedelta | None = None,
    overlap: Overlap = "allow",
    jitter: str | timedelta | None = None,
    start_at: str | datetime | None = None,
    end_at: str | datetime | None = None,
    pause_after_failures: int | None = None,
    queue: str = "default",
    priority: int = 0,
    tags: Sequence[str] | None = None,
    deadline: str | timedelta | None = None,
    on_late: str | None = None,
) -> Change:
    """``upsert_schedule`` for an async connection (psycopg or SQLAlchemy), awaited."""
    return await runner.run_on_async(
        conn, _upsert_plan(_validated(locals()))
    )  # locals(): the arguments


@runner.async_aware("delete_schedule_async")
def delete_schedule(conn: psycopg.Connection[Any], name: str) -> bool:
    """Delete the schedule ``name``, created from code, in ``conn``'s current transaction.

    Returns True when it existed, False when there was no such schedule; an async
    connection returns the coroutine of ``delete_schedule_async``. Its history stays until
    retention removes it. Raises ``ScheduleConflict`` for a schedule of a schedules file:
    remove it from the file.
    """
    return runner.run(conn, _delete_plan(name))


async def delete_schedule_async(conn: object, name: str) -> bool:
    """``delete_schedule`` for an async connection (psycopg or SQLAlchemy), awaited."""
    return await runner.run_on_async(conn, _delete_plan(name))


def _validated(arguments: dict[str, Any]) -> Schedule:
    """The schedule an ``upsert_schedule`` call's arguments describe (its ``locals()``, taken
    first thing: the same names in both faces), or ``ScheduleError`` (one line)."""
    name = arguments["name"]
    given = {
        key: value
        for key, value in arguments.items()
        if value is not None and key not in ("conn", "name")
    }
    if "payload" in given:
        given["payload"] = payloads.json_value(given["payload"])
    try:
        return build_schedule(name, given)
    except ConfigError as exc:
        raise ScheduleError("; ".join(exc.problems)) from None


def _upsert_plan(schedule: Schedule) -> Plan[Change]:
    rows = yield schedule_sql.SCHEDULES_UPSERT_API, {**schedule_values(schedule), "by": WRITER}
    if rows:
        return "created" if rows[0][0] else "updated"
    owner = yield schedule_sql.SCHEDULES_OWNER, {"name": schedule.name}
    return _unchanged(schedule.name, owner)


def _delete_plan(name: str) -> Plan[bool]:
    if (yield schedule_sql.SCHEDULES_DELETE_API, {"name": name, "by": WRITER}):
        return True
    owner = yield schedule_sql.SCHEDULES_OWNER, {"name": name}
    return _not_deleted(name, owner)


def _unchanged(name: str, owner: list[tuple[Any, ...]]) -> Change:
    """Why an upsert wrote nothing: the same definition, or a file owns the name."""
    if _file_owns(owner):
        raise ScheduleConflict(
            f"schedule {name!r} is declared in a schedules file; change it there, or pick "
            "another name"
        )
    return "unchanged"


def _not_deleted(name: str, owner: list[tuple[Any, ...]]) -> bool:
    if _file_owns(owner):
        raise ScheduleConflict(
            f"schedule {name!r} is declared in a schedules file; remove it from the file"
        )
    return False


def _file_owns(owner: list[tuple[Any, ...]]) -> bool:
    """Whether SCHEDULES_OWNER's rows (source, deleted) name a live schedule of a file."""
    return bool(owner) and owner[0][0] == "file" and not owner[0][1]
