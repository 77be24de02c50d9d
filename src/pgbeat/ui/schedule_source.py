"""Where the dashboard learns which schedules exist: the database, or the schedules file.

Once migration 0005 is applied, schedules live in ``pgbeat_schedules`` (synced from the
files by every scheduler replica, or created from code) with their pause state and period
history, read through ``pgbeat.scheduling.state``. Before, the dashboard parses the file it
was given with the scheduler's own parser, re-read when it changes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from pgbeat.db import ui_queries as q
from pgbeat.errors import ConfigError
from pgbeat.scheduling import state
from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.schedule import Schedule


@dataclass(frozen=True)
class ScheduleEntry:
    """A schedule and its state as the dashboard shows it."""

    schedule: Schedule
    paused: bool = False
    source: str = "file"
    state: state.ScheduleState | None = None  # from the database, with its last period


@dataclass(frozen=True)
class Schedules:
    entries: tuple[ScheduleEntry, ...]
    notice: str | None  # why the list may be incomplete (missing or invalid file)
    in_database: bool = False  # pause, resume, run now and the history are available

    def find(self, name: str) -> ScheduleEntry | None:
        return next((e for e in self.entries if e.schedule.name == name), None)


class FileSchedules:
    """The schedules of one file, cached until its modification time changes."""

    def __init__(self, path: str | None) -> None:
        self._path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[float, int] | None = None
        self._cached = Schedules((), None)

    def load(self) -> Schedules:
        if self._path is None:
            return Schedules((), "no schedules file given (--schedules)")
        try:
            stat = self._path.stat()
        except OSError:
            return Schedules((), f"{self._path}: file not found")
        key = (stat.st_mtime, stat.st_size)
        with self._lock:
            if key != self._seen:
                self._cached = self._read()
                self._seen = key
            return self._cached

    def _read(self) -> Schedules:
        assert self._path is not None
        try:
            schedules = load_schedules(self._path)
        except ConfigError as exc:
            return Schedules((), f"{exc.problems[0]} ({len(exc.problems)} problems)")
        return Schedules(tuple(ScheduleEntry(s, paused=not s.enabled) for s in schedules), None)


class ScheduleCatalog:
    """The database's schedules once migration 0005 is applied, else the file's."""

    def __init__(self, path: str | None) -> None:
        self.file = FileSchedules(path)
        self._in_database = False  # once true, stays true: migrations are not undone

    def load(self, conn: psycopg.Connection[Any]) -> Schedules:
        if not self._in_database:
            row = conn.execute(q.SCHEDULES_TABLE_EXISTS).fetchone()
            self._in_database = bool(row and row[0])
        if not self._in_database:
            return self.file.load()
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
        return Schedules(tuple(entries), notice, in_database=True)
