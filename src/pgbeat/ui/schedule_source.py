"""Where the dashboard learns which schedules exist: ``pgbeat_schedules``, synced from the
files by every scheduler replica or created from code, with their pause state and period
history, read through ``pgbeat.scheduling.state``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.scheduling import state
from pgbeat.scheduling.schedule import Schedule


@dataclass(frozen=True)
class ScheduleEntry:
    """A schedule and its state as the dashboard shows it."""

    schedule: Schedule
    paused: bool = False
    source: str = "file"  # or "api": who owns it
    state: state.ScheduleState | None = None  # from the database, with its last period


@dataclass(frozen=True)
class Schedules:
    entries: tuple[ScheduleEntry, ...]
    notice: str | None  # why the list may be incomplete (schedules that do not validate)

    def find(self, name: str) -> ScheduleEntry | None:
        return next((e for e in self.entries if e.schedule.name == name), None)


class ScheduleCatalog:
    """The database's schedules, with a notice for those that do not validate."""

    def __init__(self) -> None:
        self._migrated = False  # once true, stays true: migrations are not undone

    def load(self, conn: psycopg.Connection[Any]) -> Schedules:
        if not self._migrated:
            row = conn.execute(schedule_sql.SCHEDULES_TABLE_EXISTS).fetchone()
            self._migrated = bool(row and row[0])
        if not self._migrated:
            return Schedules((), "the database has no pgbeat_schedules yet: run pgbeat migrate")
        entries, problems = [], []
        for found in state.list_schedules(conn):
            if found.schedule is None:
                problems.append(f"{found.name}: {found.problem}")
                continue
            entries.append(ScheduleEntry(found.schedule, found.paused, found.source, found))
        notice = None
        if problems:
            notice = f"{len(problems)} schedules do not validate and are not run: " + "; ".join(
                problems[:3]
            )
        return Schedules(tuple(entries), notice)
