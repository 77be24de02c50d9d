"""File sync: the schedules of a replica's schedules.toml written into ``pgbeat_schedules``.

Every replica syncs its file on start and on reload (SIGHUP), so N replicas write the same
rows; syncs take turns under an advisory lock, and writing a definition the row already has
writes nothing. Replicas holding different versions of the file do not fight:

    Among the files held by live scheduler replicas, the newest one is in effect: the
    version the database saw first most recently (``pgbeat_schedule_files.first_seen_at``).

A replica whose file is older leaves the table alone (and ``pgbeat status`` names it); one
restarted with an old file does not undo a newer one. When no live replica holds the file
in effect any more (a rollback has finished, or its replicas are gone), the newest of the
remaining files takes over at its replicas' next check (``needs_sync``). A file sync never
touches a schedule created from code: such a name in a file is left to the code, with a
warning, and taken back by the file once the code deletes it (``freed_by_code``). A reload
refuses a file that declares no ``[schedules]`` table at all (``load_for_reload``).
"""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgbeat.db.literals import text_array
from pgbeat.db.sql import schedule_files as file_sql
from pgbeat.db.sql import schedules as schedule_sql
from pgbeat.errors import ConfigError
from pgbeat.observe.liveness import STALE_AFTER
from pgbeat.scheduling.definition import file_hash, schedule_values
from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.schedule import Schedule

log = logging.getLogger("pgbeat.scheduler")

# The advisory lock's key: the first 8 bytes of "pgbeat.s" as a signed bigint, fixed forever.
SYNC_LOCK_KEY = int.from_bytes(b"pgbeat.s", "big", signed=True)


@dataclass(frozen=True)
class SyncResult:
    """What a file sync did: ``applied`` when this file is in effect now."""

    file_hash: str
    applied: bool
    newest: str | None  # the newest file among the live replicas' (this one's included)
    written: list[str] = field(default_factory=list)  # schedules created or changed
    deleted: list[str] = field(default_factory=list)  # file schedules no longer declared
    left_to_code: list[str] = field(default_factory=list)  # names created from code


def sync_file(
    conn: psycopg.Connection[Any], schedules: Sequence[Schedule], *, replica: str
) -> SyncResult:
    """Write ``schedules`` (one file's enabled schedules) as the file schedules, if newest.

    ``replica`` is this process's ``pgbeat_processes`` id. Runs in a transaction of its own
    on ``conn`` (an autocommit connection).
    """
    fingerprint = file_hash(schedules)
    names = sorted(s.name for s in schedules)
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cursor:
        cursor.execute(file_sql.FILES_LOCK, {"key": SYNC_LOCK_KEY})
        cursor.execute(file_sql.FILES_SEEN, {"hash": fingerprint, "by": replica, "names": names})
        newest = _files(cursor, fingerprint, replica)["newest"]
        if newest != fingerprint:
            return SyncResult(fingerprint, applied=False, newest=newest)
        result = _apply(cursor, schedules, fingerprint, replica)
        cursor.execute(file_sql.FILES_APPLIED, {"hash": fingerprint, "by": replica})
    return result


def needs_sync(conn: psycopg.Connection[Any], fingerprint: str, *, replica: str) -> bool:
    """True when this replica's file is the newest live one but not the one in effect.

    That happens when the replicas of a newer file are gone; the caller then syncs.
    """
    with conn.cursor(row_factory=dict_row) as cursor:
        files = _files(cursor, fingerprint, replica)
    return bool(files["newest"] == fingerprint and files["in_effect"] != fingerprint)


def freed_by_code(conn: psycopg.Connection[Any], left_to_code: Sequence[str]) -> bool:
    """True when a name the last sync left to code is no longer a live schedule from code
    (the code deleted it): the caller syncs again so that the file's schedule runs."""
    if not left_to_code:
        return False
    with conn.cursor(row_factory=dict_row) as cursor:
        cursor.execute(schedule_sql.SCHEDULES_OWNED_BY_API, {"names": sorted(left_to_code)})
        still = {row["name"] for row in cursor}
    return bool(set(left_to_code) - still)


def load_for_reload(path: str | Path) -> list[Schedule]:
    """``load_schedules(path)`` for a reload (SIGHUP), refusing a file without schedules.

    A file caught half-written by an editor, or truncated to zero bytes, would otherwise
    delete every file schedule of the fleet. To remove them all on purpose, the file keeps
    an empty ``[schedules]`` table.
    """
    schedules = load_schedules(path)
    if schedules or _has_schedules_table(path):
        return schedules
    raise ConfigError(
        [
            f"{path} declares no schedules (empty, or caught while being written?); "
            "to remove every file schedule on purpose, write an empty [schedules] table"
        ]
    )


def _has_schedules_table(path: str | Path) -> bool:
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return False
    return isinstance(document.get("schedules"), dict)


def _files(cursor: psycopg.Cursor[dict[str, Any]], fingerprint: str, replica: str) -> Any:
    params = {"hash": fingerprint, "by": replica, "stale_after": STALE_AFTER}
    return cursor.execute(file_sql.FILES_NEWEST_LIVE, params).fetchone()


def file_columns(schedules: Sequence[Schedule]) -> dict[str, list[Any]]:
    """The definition columns of ``schedules``, one list per column, for the one upsert."""
    rows = [schedule_values(schedule) for schedule in schedules]
    columns: dict[str, list[Any]] = {}
    for plural, column in _COLUMNS:
        columns[plural] = [row[column] for row in rows]
    # each schedule's tags as an array literal: arrays of arrays must be rectangular
    columns["tags"] = [None if row["tags"] is None else text_array(row["tags"]) for row in rows]
    return columns


_COLUMNS = (
    ("names", "name"),
    ("kinds", "kind"),
    ("crons", "cron"),
    ("everys", "every"),
    ("timezones", "timezone"),
    ("payloads", "payload"),
    ("max_attempts", "max_attempts"),
    ("catch_ups", "catch_up"),
    ("catch_up_windows", "catch_up_window"),
    ("overlaps", "overlap"),
    ("jitters", "jitter"),
    ("start_ats", "start_at"),
    ("end_ats", "end_at"),
    ("pause_after_failures", "pause_after_failures"),
    ("queues", "queue"),
    ("priorities", "priority"),
    ("deadlines", "deadline"),
    ("on_lates", "on_late"),
    ("definition_hashes", "definition_hash"),
)


def _apply(
    cursor: psycopg.Cursor[dict[str, Any]],
    schedules: Sequence[Schedule],
    fingerprint: str,
    replica: str,
) -> SyncResult:
    """Write the file's schedules (by name, so concurrent writers lock rows alike)."""
    names = sorted(s.name for s in schedules)
    owned = {
        row["name"] for row in cursor.execute(schedule_sql.SCHEDULES_OWNED_BY_API, {"names": names})
    }
    for name in sorted(owned):
        log.warning(
            "schedules file: %r is a schedule created from code; the file's is ignored", name
        )
    params: dict[str, Any] = {**file_columns(schedules), "skip": sorted(owned)}
    params |= {"file_hash": fingerprint, "by": replica}
    written = sorted(
        row["name"] for row in cursor.execute(schedule_sql.SCHEDULES_UPSERT_FILE, params)
    )
    deleted = [
        row["name"]
        for row in cursor.execute(
            schedule_sql.SCHEDULES_DELETE_FILE_OTHERS, {"names": names, "by": replica}
        )
    ]
    if written or deleted:
        log.info(
            "schedules file %s in effect: %d schedules written, %d deleted",
            fingerprint,
            len(written),
            len(deleted),
        )
    return SyncResult(fingerprint, True, fingerprint, written, sorted(deleted), sorted(owned))
