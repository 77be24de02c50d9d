"""``pgbeat migrate``, ``status`` and ``health``: the schema, what runs, what is missing."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from pgbeat.cli import common, types
from pgbeat.db import connections, migrate, roles, schemas, urls
from pgbeat.durations import format_duration
from pgbeat.errors import ConfigError, UserError
from pgbeat.observe.fleet import Fleet, fresh_workers, read_fleet
from pgbeat.observe.liveness import STALE_AFTER
from pgbeat.scheduling import deadlines, state
from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.health import ScheduleHealth, schedule_health
from pgbeat.scheduling.schedule import Schedule


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
        "roles",
        parents=[common_flags],
        help="create or update the least-privilege roles (docs/least-privilege.sql)",
    )
    p.add_argument("--print", action="store_true", dest="print_sql", help="print the SQL instead")
    p.add_argument(
        "--suffix",
        default=None,
        metavar="TEXT",
        help="group roles named pgbeat_<group>TEXT (default: as the database was set up)",
    )
    p.set_defaults(func=cmd_roles)

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
        sys.stdout.write(migrate.migration_script(schemas.configured_schema()))
        return 0
    url = urls.resolve_url(args.database_url)
    with connections.translated_errors(url), connections.connect(url) as conn:
        applied = common.migrate_schema(conn)
        for migration in applied:
            print(f"applied {migration.version:04d}_{migration.name}")
        if not applied:
            print("schema is up to date")
        suffix = roles.deployed_suffix(conn) if applied else None
        if suffix is not None:  # set up with the roles: grant what the new schema needs
            try:
                roles.apply_roles(conn, suffix)
            except psycopg.Error as exc:
                if connections.is_connection_failure(exc, conn):
                    raise
                raise UserError(
                    "the schema is upgraded, but the least-privilege roles could not be "
                    f"updated ({_first_line(exc)}): run `pgbeat roles` as a superuser"
                ) from None
            print(f"roles updated: pgbeat_*{suffix} (docs/least-privilege.sql)")
    return 0


def cmd_roles(args: argparse.Namespace) -> int:
    suffix = args.suffix or ""
    if not roles.valid_suffix(suffix):
        raise UserError("--suffix: at most 40 of a-z, 0-9 and _")
    if args.print_sql:
        sys.stdout.write(roles.roles_script(suffix))
        return 0
    url = urls.resolve_url(args.database_url)
    with connections.translated_errors(url), connections.connect(url) as conn:
        migrate.require_current_schema(conn)
        if args.suffix is None:
            suffix = roles.deployed_suffix(conn) or ""
        roles.apply_roles(conn, suffix)
    print(f"roles pgbeat_*{suffix} created or updated (docs/least-privilege.sql)")
    return 0


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().partition("\n")[0][:300] or type(exc).__name__


def cmd_health(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    try:
        with common.migrated_database(url, timeout=3) as conn:
            workers = fresh_workers(conn, args.max_age)
    except Exception as exc:
        print(f"unhealthy: {urls.scrub(types.one_line(str(exc)), url)}")
        return 1
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
        stored = state.list_schedules(conn)
        if stored:  # the table, once a scheduler has synced its file (or code wrote some)
            schedules = [s.schedule for s in stored if s.schedule is not None]
        healths = schedule_health(conn, schedules, {s.name: s for s in stored}, now)
        fleet = read_fleet(conn)
    late = [h.late_period for h in healths if h.late_period is not None]
    warnings = _warnings(fleet, healths) + fleet.file_warnings() + fleet.unserved_warnings()
    warnings += [deadlines.describe(found) for found in late]
    if problem:
        warnings.insert(0, problem)
    schedule_rows = [h.as_json() for h in healths]
    if args.json:
        common.print_json(
            {
                "now": now,
                "processes": fleet.processes,
                "schedules": schedule_rows,
                "retention": fleet.retention,
                "schedules_files": fleet.files_json(),
                "warnings": warnings,
                "unserved_kinds": [
                    {"kind": kind, "queue": queue, "pending": count}
                    for kind, queue, count in fleet.unserved
                ],
                "late_schedules": [dataclasses.asdict(found) for found in late],
            }
        )
        return 1 if late else 0
    _print_status(now, fleet.processes, schedule_rows, warnings)
    _print_retention(fleet.retention)
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


def _warnings(fleet: Fleet, schedules: list[ScheduleHealth]) -> list[str]:
    warnings = [
        f"schedule {h.schedule}: period {h.latest_due_key} is missing (missed period)"
        for h in schedules
        if h.missing
    ]
    if not fleet.workers:
        warnings.append("no live worker")
    if schedules and not fleet.schedulers:
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
            if r["verdict"] == "late":  # a period not done within the deadline
                shown = "LATE"
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
