"""Where the dashboard learns which schedules exist: the schedules file it was given.

The file is parsed with the scheduler's own parser and re-read when it changes, so the
dashboard and the scheduler replicas reading the same file agree on every fire time.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from pgbeat.errors import ConfigError
from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.schedule import Schedule


@dataclass(frozen=True)
class ScheduleEntry:
    """A schedule and its state as the dashboard shows it."""

    schedule: Schedule
    paused: bool = False
    source: str = "file"


@dataclass(frozen=True)
class Schedules:
    entries: tuple[ScheduleEntry, ...]
    notice: str | None  # why the list may be incomplete (missing or invalid file)

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
