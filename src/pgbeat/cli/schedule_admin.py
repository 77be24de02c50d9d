"""``pgbeat schedules list|pause|resume|run|backfill|history``: the schedules in the database.

Each command is one call of ``pgbeat.scheduling.state`` on an autocommit connection, so a
pause or a run commits at once and running schedulers see it within a tick.
"""

from __future__ import annotations

import argparse
import getpass
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

from pgbeat.cli import common, types
from pgbeat.db import connections, urls
from pgbeat.durations import format_duration
from pgbeat.errors import ScheduleNotFound, UserError
from pgbeat.scheduling import state
from pgbeat.scheduling.fires import fire_times_after
from pgbeat.scheduling.schedule import Schedule, has_ended
from pgbeat.scheduling.state import PeriodRecord, ScheduleState
from pgbeat.scheduling.timing import typed_time

BACKFILL_SHOWN = 10  # periods a dry run lists


def add_commands(sub: Any, common_flags: argparse.ArgumentParser) -> None:
    """Register the commands under ``pgbeat schedules``."""
    p = sub.add_parser(
        "list", parents=[common_flags], help="the schedules in the database, next and last periods"
    )
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.set_defaults(func=cmd_list)

    for name, func, text in (
        ("pause", cmd_pause, "pause a schedule: its periods are skipped until resumed"),
        ("resume", cmd_resume, "resume a paused schedule (the paused periods are not caught up)"),
        ("run", cmd_run_now, "enqueue a schedule's job now; prints the job id"),
    ):
        p = sub.add_parser(name, parents=[common_flags], help=text)
        p.add_argument("name", metavar="NAME")
        p.set_defaults(func=func)

    p = sub.add_parser(
        "backfill",
        parents=[common_flags],
        help="enqueue a schedule's past periods in [--from, --to) that have no history yet",
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--from", dest="start", type=types.schedule_time, required=True, metavar="ISO")
    p.add_argument("--to", dest="end", type=types.schedule_time, required=True, metavar="ISO")
    p.add_argument("--dry-run", action="store_true", help="print what it would enqueue")
    p.set_defaults(func=cmd_backfill)

    p = sub.add_parser(
        "history", parents=[common_flags], help="a schedule's periods and what became of them"
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("--limit", type=types.positive_int, default=20, metavar="N")
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.set_defaults(func=cmd_history)


def _who() -> str:
    """Who asked, as recorded in the history and the pause columns."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"cli:{user}@{socket.gethostname()}"


def cmd_list(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        now = connections.database_now(conn)
        schedules = state.list_schedules(conn)
    rows = [_schedule_json(s, now) for s in schedules]
    if args.json:
        common.print_json(rows)
        return 0
    if not rows:
        print("no schedules in the database (a scheduler writes its schedules file at start)")
        return 0
    common_columns = ["NAME", "SOURCE", "WHEN", "ZONE", "STATE", "OVERLAP", "JITTER"]
    header = [*common_columns, "NEXT (UTC)", "NEXT (LOCAL)", "LAST PERIOD", "JOB", "BY", "LAG"]
    _print_table(header, [_schedule_cells(row) for row in rows])
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        changed = state.pause_schedule(conn, args.name, by=_who())
    print(f"paused {args.name}" if changed else f"{args.name} was already paused")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        changed = state.resume_schedule(conn, args.name, by=_who())
    print(f"resumed {args.name}" if changed else f"{args.name} was not paused")
    return 0


def cmd_run_now(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        job_id = state.run_schedule_now(conn, args.name, by=_who())
    print(job_id)
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        try:
            found = state.get_schedule(conn, args.name)
            zone = found.schedule.zone if found and found.schedule else None
            start, end = (typed_time(text, zone) for text in (args.start, args.end))
            if args.dry_run:
                plan = state.preview_backfill(conn, args.name, start, end)
            else:
                count = state.backfill(conn, args.name, start, end, by=_who())
        except ValueError as exc:
            raise UserError(str(exc)) from None
    if not args.dry_run:
        print(f"enqueued {count} periods of {args.name}")
        return 0
    done = len(plan.periods) - len(plan.new)
    print(f"would enqueue {len(plan.new)} periods of {args.name} ({done} already decided)")
    for fire in plan.new[:BACKFILL_SHOWN]:
        print(f"  {_utc(fire)}")
    if len(plan.new) > BACKFILL_SHOWN:
        print(f"  ... and {len(plan.new) - BACKFILL_SHOWN} more")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        found = state.get_schedule(conn, args.name)
        records = state.schedule_history(conn, args.name, limit=args.limit)
    if found is None and not records:
        raise ScheduleNotFound(f"no schedule named {args.name!r}")
    rows = [_period_json(record) for record in records]
    if args.json:
        common.print_json(rows)
        return 0
    header = ["FIRE AT (UTC)", "OUTCOME", "REASON", "JOB", "STATUS", "INSERTED BY", "LAG"]
    cells = [
        [
            _utc(r.fire_at),
            r.outcome + (" LATE" if r.late else ""),
            r.reason or "-",
            str(r.job_id) if r.job_id is not None else "-",
            r.job_status or "-",
            r.inserted_by or "-",
            _lag(r.lag),
        ]
        for r in records
    ]
    _print_table(header, cells)
    return 0


def _schedule_json(found: ScheduleState, now: datetime) -> dict[str, Any]:
    schedule = found.schedule
    upcoming = [] if schedule is None else fire_times_after(schedule, now, 1)
    next_fire = upcoming[0] if upcoming else None
    return {
        "name": found.name,
        "source": found.source,
        "cron": None if schedule is None else schedule.cron,
        "every": None if schedule is None or schedule.every is None else _span(schedule.every),
        "timezone": None if schedule is None else schedule.timezone,
        "kind": None if schedule is None else schedule.kind,
        "paused": found.paused,
        "paused_by": found.paused_by,
        "paused_reason": found.paused_reason,
        "ended": schedule is not None and has_ended(schedule, now),
        "overlap": None if schedule is None else schedule.overlap,
        "jitter": None if schedule is None or schedule.jitter is None else _span(schedule.jitter),
        "start_at": None if schedule is None else schedule.start_at,
        "end_at": None if schedule is None else schedule.end_at,
        "pause_after_failures": None if schedule is None else schedule.pause_after_failures,
        "queue": None if schedule is None else schedule.queue,
        "priority": None if schedule is None else schedule.priority,
        "deadline": None
        if schedule is None or schedule.deadline is None
        else _span(schedule.deadline),
        "on_late": None if schedule is None else schedule.on_late,
        "next_fire": next_fire,
        "next_fire_local": _local(schedule, next_fire),
        "last_period": None if found.last is None else _period_json(found.last),
        "problem": found.problem,
    }


def _period_json(record: PeriodRecord) -> dict[str, Any]:
    return {
        "fire_at": record.fire_at,
        "outcome": record.outcome,
        "reason": record.reason,
        "job_id": record.job_id,
        "job_status": record.job_status,
        "inserted_at": record.inserted_at,
        "inserted_by": record.inserted_by,
        "lag": round(record.lag.total_seconds(), 3),
        "due_by": record.due_by,
        "late": record.late,
        "late_at": record.late_at,
        "late_status": record.late_status,
    }


def _schedule_cells(row: dict[str, Any]) -> list[str]:
    last = row["last_period"]
    when = f"cron {row['cron']}" if row["cron"] else f"every {row['every']}"
    job = "-"
    if last is not None and last["job_id"] is not None:
        job = f"{last['job_id']} {last['job_status'] or 'purged'}"
    elif last is not None:
        job = f"{last['outcome']} ({last['reason']})" if last["reason"] else last["outcome"]
    return [
        row["name"],
        row["source"],
        "invalid" if row["problem"] else when,
        row["timezone"] or "-",
        _state_cell(row),
        row["overlap"] or "-",
        row["jitter"] or "-",
        _utc(row["next_fire"]) if row["next_fire"] else "-",
        row["next_fire_local"] or "-",
        _utc(last["fire_at"]) if last else "-",
        job,
        (last["inserted_by"] or "-") if last else "-",
        f"{last['lag']:.3f}s" if last else "-",
    ]


def _state_cell(row: dict[str, Any]) -> str:
    if row["paused"]:
        return f"paused ({row['paused_reason']})" if row["paused_reason"] else "paused"
    return "ended" if row["ended"] else "active"


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    for line in (header, *rows):
        cells = (cell.ljust(width) for cell, width in zip(line, widths, strict=True))
        print("  ".join(cells).rstrip())


def _utc(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%SZ}"


def _local(schedule: Schedule | None, moment: datetime | None) -> str | None:
    if schedule is None or moment is None:
        return None
    return f"{moment.astimezone(schedule.zone):%Y-%m-%d %H:%M:%S %Z}"


def _span(value: timedelta) -> str:
    return format_duration(value) or "0s"


def _lag(value: timedelta) -> str:
    return f"{value.total_seconds():.3f}s"
