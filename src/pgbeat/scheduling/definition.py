"""A ``Schedule`` as a row of ``pgbeat_schedules`` and back, and the fingerprints replicas compare.

Pure. ``definition_hash`` covers what decides a schedule's periods and jobs (not its name,
nor operational state such as ``paused``): a replica inserts a period only while the row
still carries the hash it computed the period from. ``file_hash`` fingerprints the
definitions of a whole file, so reformatting or commenting a file is not a new version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pgbeat.scheduling.schedule import FROM_JSONB, Schedule

# The columns of pgbeat_schedules that hold a definition, in the order of the hash.
DEFINITION_COLUMNS = (
    "kind",
    "cron",
    "every",
    "timezone",
    "payload",
    "max_attempts",
    "catch_up",
    "catch_up_window",
    "overlap",
    "jitter",
    "start_at",
    "end_at",
    "pause_after_failures",
    "queue",
    "priority",
    "tags",
    "deadline",
    "on_late",
)
# Keys that join the fingerprint only when set, so that the definitions written before
# they existed keep their hash (replicas of two versions agree on such a schedule).
_OPTIONAL_DEFAULTS: dict[str, Any] = {
    "start_at": None,
    "end_at": None,
    "pause_after_failures": None,
    "queue": "default",
    "priority": 0,
    "tags": None,
    "deadline": None,
    "on_late": None,
}


def definition_hash(schedule: Schedule) -> str:
    """A short fingerprint of what the schedule enqueues and when (16 hex digits)."""
    return _digest(_canonical(schedule))


def file_hash(schedules: Iterable[Schedule]) -> str:
    """A short fingerprint of a set of schedules: the names and their definitions (12 hex)."""
    pairs = sorted((s.name, definition_hash(s)) for s in schedules)
    return _digest(json.dumps(pairs, separators=(",", ":")))[:12]


def schedule_values(schedule: Schedule) -> dict[str, Any]:
    """The definition columns of ``schedule``, as query parameters (payload as JSON text)."""
    return {
        "name": schedule.name,
        "kind": schedule.kind,
        "cron": schedule.cron,
        "every": schedule.every,
        "timezone": schedule.timezone,
        "payload": json.dumps(schedule.payload, sort_keys=True),
        "max_attempts": schedule.max_attempts,
        "catch_up": schedule.catch_up,
        "catch_up_window": schedule.catch_up_window,
        "overlap": schedule.overlap,
        "jitter": schedule.jitter,
        "start_at": schedule.start_at,
        "end_at": schedule.end_at,
        "pause_after_failures": schedule.pause_after_failures,
        "queue": schedule.queue,
        "priority": schedule.priority,
        "tags": None if schedule.tags is None else list(schedule.tags),
        "deadline": schedule.deadline,
        "on_late": schedule.on_late,
        "definition_hash": definition_hash(schedule),
    }


def schedule_from_row(row: Mapping[str, Any]) -> Schedule:
    """The ``Schedule`` of a pgbeat_schedules row (validated: rows may come from raw SQL)."""
    # A NULL is the default (a payload too: {}); a row without a payload column (a
    # replica's load: catalog.py) validates the rest.
    values = {c: v for c in DEFINITION_COLUMNS if (v := row.get(c)) is not None}
    values["name"] = row["name"]
    return Schedule.model_validate(values, context={FROM_JSONB: True})


def _canonical(schedule: Schedule) -> str:
    values: dict[str, Any] = {
        "kind": schedule.kind,
        "cron": schedule.cron,
        "every": _seconds(schedule.every),
        "timezone": schedule.timezone,
        "payload": schedule.payload,
        "max_attempts": schedule.max_attempts,
        "catch_up": schedule.catch_up,
        "catch_up_window": _seconds(schedule.catch_up_window),
        "overlap": schedule.overlap,
        "jitter": _seconds(schedule.jitter),
    }
    for key, default in _OPTIONAL_DEFAULTS.items():
        value = getattr(schedule, key)
        if value != default:
            values[key] = _plain(list(value) if isinstance(value, tuple) else value)
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def _plain(value: Any) -> Any:
    """A value of the fingerprint as JSON holds it (instants as ISO-8601, spans in seconds)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
