"""``pgbeat migrate``, ``status`` and ``health``: the schema, what runs, what is missing."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgbeat import flow
from pgbeat.cli import common, types
from pgbeat.db import connections, migrate, urls
from pgbeat.db.sql import history as history_sql
from pgbeat.db.sql import processes as process_sql
from pgbeat.db.sql import retention as retention_sql
from pgbeat.db.sql import schedule_files as file_sql
from pgbeat.db.sql.jobs import actions as action_sql
from pgbeat.durations import format_duration
from pgbeat.errors import ConfigError
from pgbeat.observe.liveness import OVERDUE_GRACE, STALE_AFTER
from pgbeat.scheduling import deadlines, state
from pgbeat.scheduling.catchup import latest_fire_between
from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.fires import fire_times_after
from pgbeat.scheduling.schedule import Schedule, has_ended, unique_key


def add_commands(commands: Any, common_flags: argparse.ArgumentParser) -> None:
    p = commands.add_parser("migrate", parents=[common_flags], help="create or upgrade the schema")
    p.add_argument(
        "--print",
        action="store_true",
        dest="print_sql",
        help="print the SQL instead of applying it",
    )
    p.set_defaults(func=cmd_migrate)

    p = commands.add_parser(
        "status", parents=[common_flags], help="live processes, schedules, missed periods"
    )
    p.add_argument("--schedules", default="schedules.toml", metavar="PATH")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = commands.add_parser(
        "health",
        parents=[common_flags],
        help="exit 0 when the database, schema and a worker are alive",
    )
    p.add_argument(
        "--max-age",
        type=types.duration,
        default=STALE_AFTER,
        metavar="DURATION",
        help="how fresh a worker heartbeat must be (default 30s)",
    )
    p.set_defaults(func=cmd_health)


def cmd_migrate(args: argparse.Namespace) -> int:
    if args.print_sql:
        sys.stdout.write(migrate.migration_script())
        return 0
    url = urls.resolve_url(args.database_url)
    with connections.translated_errors(url), connections.connect(url) as conn:
        applied = migrate.apply_migrations(conn)
    for migration in applied:
        print(f"applied {migration.version:04d}_{migration.name}")
    if not applied:
        print("schema is up to date")
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    try:
        with common.migrated_database(url, timeout=3) as conn:
            row = conn.execute(
                process_sql.PROCESSES_FRESH_WORKERS, {"max_age": args.max_age}
            ).fetchone()
    except Exception as exc:
        print(f"unhealthy: {urls.scrub(types.one_line(str(exc)), url)}")
        return 1
    workers = int(row[0]) if row else 0
    if workers == 0:
        print(f"unhealthy: no worker heartbeat in the last {args.max_age.total_seconds():g}s")
        return 1
    noun = "worker" if workers == 1 else "workers"
    print(f"healthy: database reachable, schema current, {workers} live {noun}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    schedules, problem = _schedules_if_any(args.schedules)
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        now = connections.database_now(conn)
        with conn.cursor(row_factory=dict_row) as cursor:
            processes = cursor.execute(
                process_sql.PROCESSES_LIST, {"stale_after": STALE_AFTER}
            ).fetchall()
        stored = state.list_schedules(conn)
        if stored:  # the table, once a scheduler has synced its file (or code wrote some)
            schedules = [s.schedule for s in stored if s.schedule is not None]
        schedule_rows = _schedule_status(conn, schedules, now, {s.name: s for s in stored})
        with conn.cursor(row_factory=dict_row) as cursor:
            files = cursor.execute(
                file_sql.FILES_AGREEMENT, {"stale_after": STALE_AFTER}
            ).fetchall()
            retention = cursor.execute(retention_sql.RETENTION_STATUS).fetchone()
        pending = [tuple(row) for row in conn.execute(action_sql.JOBS_PENDING_KINDS)]
        late = deadlines.late_schedules(conn, now)
    workers = [p["details"] or {} for p in processes if p["role"] == "worker"]
    unserved = flow.unserved_kinds(pending, workers) if workers else []
    warnings = _warnings(processes, schedule_rows) + _file_warnings(files)
    warnings += [
        f"no live worker claims kind {kind} in queue {queue} ({count} pending jobs wait)"
        for kind, queue, count in unserved
    ]
    warnings += [deadlines.describe(found) for found in late]
    if problem:
        warnings.insert(0, problem)
    if args.json:
        common.print_json(
            {
                "now": now,
                "processes": processes,
                "schedules": schedule_rows,
                "retention": retention,
                "warnings": warnings,
                "unserved_kinds": [
                    {"kind": kind, "queue": queue, "pending": count}
                    for kind, queue, count in unserved
                ],
                "late_schedules": [dataclasses.asdict(found) for found in late],
            }
        )
        return 1 if late else 0
    _print_status(now, processes, schedule_rows, warnings)
    _print_retention(retention)
    return 1 if late else 0  # a late schedule fails the probe


def _schedules_if_any(path: str) -> tuple[list[Schedule], str | None]:
    try:
        if not Path(path).exists():
            return [], None
    except OSError as exc:  # e.g. a name too long for the file system
        return [], f"{path} cannot be read: {exc.strerror or exc}"
    try:
        return load_schedules(path), None
    except ConfigError as exc:
        return [], f"{path} is invalid: {exc.problems[0]}"


def _schedule_status(
    conn: psycopg.Connection[Any],
    schedules: list[Schedule],
    now: datetime,
    stored: dict[str, state.ScheduleState],
) -> list[dict[str, Any]]:
    rows = []
    for schedule in schedules:
        # the last period that should exist by now, if it is young enough to be checked:
        # not before the schedule was resumed (or, from code, created)
        entry = stored.get(schedule.name)
        floors = [] if entry is None else [entry.resumed_at]
        if entry is not None and entry.source == "api":  # a file's existed before its row
            floors.append(entry.created_at)
        if schedule.start_at is not None:  # no period before its start
            floors.append(schedule.start_at - timedelta(microseconds=1))
        checked_from = max([now - schedule.catch_up_window, *(f for f in floors if f)])
        checked_until = now - OVERDUE_GRACE
        if schedule.end_at is not None:  # nor after its end: past it, "ended", not missing
            checked_until = min(checked_until, schedule.end_at)
        latest = None
        if checked_from < checked_until:
            latest = latest_fire_between(schedule, checked_from, checked_until)
        upcoming = fire_times_after(schedule, now, 1)
        rows.append(
            {
                "schedule": schedule.name,
                "kind": schedule.kind,
                "enabled": schedule.enabled and not (entry is not None and entry.paused),
                "paused": entry is not None and entry.paused,
                "paused_reason": None if entry is None else entry.paused_reason,
                "ended": has_ended(schedule, now),
                "latest_due": latest,
                "latest_due_key": unique_key(schedule, latest) if latest else None,
                "next_fire": upcoming[0] if upcoming else None,
                "present": None,
            }
        )
    checked = [r for r in rows if r["latest_due_key"] and r["enabled"]]
    if checked:
        found = set(
            conn.execute(
                action_sql.JOBS_EXISTING_KEYS,
                {
                    "kinds": [r["kind"] for r in checked],
                    "keys": [r["latest_due_key"] for r in checked],
                },
            ).fetchall()
        )
        decided = set(
            conn.execute(
                history_sql.HISTORY_DECIDED,
                {
                    "schedules": [r["schedule"] for r in checked],
                    "fire_ats": [r["latest_due"] for r in checked],
                },
            ).fetchall()
        )
        for r in checked:
            r["present"] = (r["kind"], r["latest_due_key"]) in found or (
                r["schedule"],
                r["latest_due"],
            ) in decided
    return rows


def _file_warnings(replicas: list[dict[str, Any]]) -> list[str]:
    """Name the scheduler replicas whose schedules file is not the one in effect."""
    if not replicas:
        return []
    effect = replicas[0]
    if effect["effect_hash"] is None:  # no file synced yet: say whether they disagree
        hashes = {r["schedules_hash"] for r in replicas}
        if len(hashes) < 2:
            return []
        names = ", ".join(f"{r['host']}:{r['pid']} (file {r['schedules_hash']})" for r in replicas)
        return [f"schedulers run {len(hashes)} different schedules files: {names}"]
    behind = [r for r in replicas if not r["in_effect"]]
    if not behind:
        return []
    names = ", ".join(f"{r['host']}:{r['pid']} (file {r['schedules_hash']})" for r in behind)
    return [
        f"scheduler replicas hold a different schedules file than the one in effect "
        f"({effect['effect_hash']}, applied by {effect['effect_applied_by']}): {names}; "
        "the newest file among live replicas wins"
    ]


def _warnings(processes: list[dict[str, Any]], schedules: list[dict[str, Any]]) -> list[str]:
    warnings = [
        f"schedule {r['schedule']}: period {r['latest_due_key']} is missing (missed period)"
        for r in schedules
        if r["present"] is False
    ]
    if not any(p["role"] == "worker" for p in processes):
        warnings.append("no live worker")
    if schedules and not any(p["role"] == "scheduler" for p in processes):
        warnings.append("no live scheduler")
    return warnings


def _print_status(
    now: datetime,
    processes: list[dict[str, Any]],
    schedules: list[dict[str, Any]],
    warnings: list[str],
) -> None:
    print(f"database time {now:%Y-%m-%d %H:%M:%S %Z}")
    print(f"\n{len(processes)} live processes")
    for p in processes:
        print(
            f"  {p['role']:<9} {p['host']}:{p['pid']:<7} v{p['version']:<7} "
            f"up since {p['started_at']:%Y-%m-%d %H:%M:%S}  beat {p['heartbeat_age_s']:.1f}s ago"
            + (f"  schedules {p['schedules_hash']}" if p["schedules_hash"] else "")
        )
    if schedules:
        print(f"\n{len(schedules)} schedules")
        for r in schedules:
            shown = {True: "enqueued", False: "MISSING", None: "-"}[r["present"]]
            if r.get("paused"):
                reason = r.get("paused_reason")
                shown = f"paused ({reason})" if reason else "paused"
            next_fire = r["next_fire"]
            upcoming = f"next {next_fire:%Y-%m-%dT%H:%M:%SZ}" if next_fire else "ended"
            print(
                f"  {r['schedule']:<20} last due {r['latest_due_key'] or '-':<40} {shown:<9}"
                f" {upcoming}"
            )
    for warning in warnings:
        print(f"warning: {warning}")


def _print_retention(row: dict[str, Any] | None) -> None:
    """Retention's last round, who holds the turn, and the oldest finished job kept."""
    if row is None:
        return
    if row["last_run_at"] is None:
        print("\nretention: no round yet")
    else:
        print(
            f"\nretention: last round {row['last_run_at']:%Y-%m-%d %H:%M:%S} by "
            f"{row['last_run_by']}, deleted {row['last_deleted']} ({row['total_deleted']} in all)"
        )
    print(f"  turn held by {row['holder'] if row['held'] else 'nobody'}")
    if row["oldest_finished_at"] is None:
        print("  oldest finished job: none kept")
    else:
        age = format_duration(timedelta(seconds=int(row["oldest_finished_age_s"] or 0)))
        print(
            f"  oldest finished job: finished {row['oldest_finished_at']:%Y-%m-%d %H:%M:%S}"
            f" ({age or '0s'} ago)"
        )
