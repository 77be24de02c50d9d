"""The schedule-facing commands: ``schedules check|next``, ``scheduler`` and ``run``.

The commands on the schedules in the database (``schedules list|pause|resume|run|history``)
are in schedule_admin.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

import psycopg

from pgbeat.cli import common, schedule_admin, types
from pgbeat.db import connections, urls
from pgbeat.errors import ConfigError, PgbeatError, UserError
from pgbeat.observe import logs
from pgbeat.scheduling import state
from pgbeat.scheduling.file import load_schedules
from pgbeat.scheduling.fires import next_fire_after
from pgbeat.scheduling.history_purge import HISTORY_RETENTION
from pgbeat.scheduling.schedule import Schedule, unique_key
from pgbeat.scheduling.scheduler import Scheduler
from pgbeat.scheduling.sync import load_for_reload
from pgbeat.scheduling.timing import typed_time
from pgbeat.signals import handling_reload_signal
from pgbeat.worker.worker import Worker

DEFAULT_SCHEDULES = "schedules.toml"


def add_commands(commands: Any, common_flags: argparse.ArgumentParser) -> None:
    schedules = commands.add_parser(
        "schedules", help="check or preview schedules.toml; list, pause, resume, run schedules"
    )
    sub = schedules.add_subparsers(
        dest="schedules_command", metavar="COMMAND", parser_class=type(schedules)
    )
    sub.required = True

    p = sub.add_parser("check", help="validate a schedules file (exit 1 on problems)")
    p.add_argument("path", nargs="?", default=DEFAULT_SCHEDULES, metavar="PATH")
    common.add_schema_flag(p)  # taken by every command; a file's check needs no database
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("next", help="when will schedules fire? (UTC and local)")
    p.add_argument("name", nargs="?", metavar="NAME")
    p.add_argument("--schedules", default=DEFAULT_SCHEDULES, metavar="PATH")
    p.add_argument(
        "--after",
        type=types.schedule_time,
        metavar="ISO-8601",
        help="preview from this time (default: now); without an offset, in the schedule's zone",
    )
    p.add_argument("--count", type=types.preview_count, default=5, metavar="N")
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.add_argument(
        "--database-url",
        metavar="URL",
        help="also preview the schedules in this database, those created from code among "
        "them (default: $DATABASE_URL when set)",
    )
    common.add_schema_flag(p)
    p.set_defaults(func=cmd_next)

    schedule_admin.add_commands(sub, common_flags)

    p = commands.add_parser(
        "scheduler", parents=[common_flags], help="enqueue due periods, forever"
    )
    p.add_argument(
        "--schedules",
        metavar="PATH",
        help="schedules file (default: ./schedules.toml if there is one, else only the "
        "schedules in the database); SIGHUP re-reads it",
    )
    _add_retention_flag(p)
    common.add_metrics_flags(p)
    p.set_defaults(func=cmd_scheduler)

    p = commands.add_parser(
        "run", parents=[common_flags], help="migrate, then scheduler + worker in one process (demo)"
    )
    p.add_argument(
        "app",
        nargs="?",
        metavar="APP",
        help="handler registry as module:attribute (default: the bundled demo)",
    )
    p.add_argument(
        "--schedules",
        metavar="PATH",
        help="schedules file (default: the demo's, or ./schedules.toml with APP)",
    )
    _add_retention_flag(p)
    common.add_worker_flags(p)
    common.add_retention_flags(p)
    common.add_metrics_flags(p)
    p.set_defaults(func=cmd_run, job_logs="all")  # a demo and development command


def _add_retention_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--history-retention",
        type=types.duration,
        default=HISTORY_RETENTION,
        metavar="DURATION",
        help="delete schedule history older than this (default 30d)",
    )


def _load(path: str | Path) -> list[Schedule]:
    """Validated schedules of a file, or one line saying what is wrong with it."""
    try:
        return load_schedules(path)
    except ConfigError as exc:
        raise UserError(str(exc)) from None


def cmd_check(args: argparse.Namespace) -> int:
    try:
        schedules = load_schedules(args.path)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    print(f"{args.path}: {len(schedules)} schedules OK")
    return 0


def cmd_next(args: argparse.Namespace) -> int:
    schedules, where = _preview_schedules(args)
    if args.name is not None:
        schedules = [s for s in schedules if s.name == args.name]
        if not schedules:
            raise UserError(f"{where}: no schedule named {args.name!r}")
    after = common.now_utc() if args.after is None else _after(args.after, schedules)
    # Schedules that fire at the same instant are listed by name (a Schedule has no order).
    rows = sorted(
        (
            (fire, schedule)
            for schedule in schedules
            for fire in _fire_times_in_calendar(schedule, after, args.count)
        ),
        key=lambda row: (row[0], row[1].name),
    )
    if schedules and not rows:
        if all(s.end_at is not None and s.end_at <= after for s in schedules):
            raise UserError(f"no period after {after.isoformat()}: the schedule has ended")
        raise UserError(f"no fire time after {after.isoformat()} before the year 10000")
    if args.json:
        print(json.dumps([_fire_json(schedule, fire) for fire, schedule in rows], indent=2))
        return 0
    for fire, schedule in rows:
        local = fire.astimezone(schedule.zone)
        print(
            f"{schedule.name:<20} {fire:%Y-%m-%dT%H:%M:%SZ}  "
            f"{local:%Y-%m-%d %H:%M:%S %Z} ({schedule.timezone})  {unique_key(schedule, fire)}"
        )
    return 0


def _preview_schedules(args: argparse.Namespace) -> tuple[list[Schedule], str]:
    """The file's schedules, and those of the database when one is configured (the file's
    definition first for a name in both); and where they were looked for."""
    url = args.database_url or os.environ.get("DATABASE_URL")
    url = urls.in_schema(url) if url else None
    from_file: list[Schedule] = []
    if url is None or args.schedules != DEFAULT_SCHEDULES or Path(args.schedules).exists():
        from_file = _load(args.schedules)
    if url is None:
        return from_file, args.schedules
    try:
        with connections.connect(url) as conn:
            stored = [s.schedule for s in state.list_schedules(conn) if s.schedule is not None]
    except psycopg.errors.UndefinedTable:
        stored = []  # not migrated: no schedule in the database yet
    except PgbeatError as exc:
        if not from_file:
            raise
        print(f"warning: only {args.schedules}'s schedules: {exc}", file=sys.stderr)
        return from_file, args.schedules
    names = {s.name for s in from_file}
    merged = from_file + [s for s in stored if s.name not in names]
    return merged, f"{args.schedules} and the database"


def _after(text: str, schedules: list[Schedule]) -> datetime:
    """``--after`` as typed: without an offset, in the zone of the one schedule named."""
    zone = schedules[0].zone if len(schedules) == 1 else None
    try:
        return typed_time(text, zone)
    except ValueError as exc:
        if zone is None and len(schedules) > 1:
            raise UserError(
                f"--after: {exc} (or name one schedule: it is read in its zone)"
            ) from None
        raise UserError(f"--after: {exc}") from None


def _fire_times_in_calendar(schedule: Schedule, after: datetime, count: int) -> list[datetime]:
    """Up to ``count`` periods after ``after`` within the schedule's start_at..end_at; fewer
    when the window closes or Python's calendar ends (9999)."""
    fires: list[datetime] = []
    if schedule.start_at is not None and after < schedule.start_at:
        after = schedule.start_at - timedelta(microseconds=1)
    try:
        for _ in range(count):
            after = next_fire_after(schedule, after)
            after.astimezone(schedule.zone)  # shown in local time too
            if schedule.end_at is not None and after > schedule.end_at:
                break
            fires.append(after)
    except (OverflowError, ValueError):  # "date value out of range", "year 10000 is out of range"
        pass
    return fires


def _fire_json(schedule: Schedule, fire: datetime) -> dict[str, Any]:
    return {
        "schedule": schedule.name,
        "kind": schedule.kind,
        "fire_at": fire.isoformat(),
        "fire_at_local": fire.astimezone(schedule.zone).isoformat(),
        "timezone": schedule.timezone,
        "unique_key": unique_key(schedule, fire),
    }


def cmd_scheduler(args: argparse.Namespace) -> int:
    path = _scheduler_schedules_path(args.schedules)
    schedules = _load(path) if path is not None else None
    url = urls.resolve_url(args.database_url)
    common.check_database(url)
    scheduler = Scheduler(
        url,
        schedules,
        metrics=common.start_metrics(args, url, [s.kind for s in schedules or []]),
        load=None if path is None else lambda: load_for_reload(path),
        history_retention=args.history_retention,
    )
    with common.stop_on_signals([scheduler.stop]), handling_reload_signal(scheduler.reload):
        scheduler.run()
    return 0


def _scheduler_schedules_path(given: str | None) -> Path | None:
    """--schedules (which must exist); else ./schedules.toml if there is one; else None."""
    if given is not None:
        return Path(given)
    default = Path(DEFAULT_SCHEDULES)
    return default if default.is_file() else None


def cmd_run(args: argparse.Namespace) -> int:
    logs.job_lines(every=args.job_logs == "all")
    registry = common.load_registry(args.app or common.DEMO_APP)
    path = _run_schedules_path(args)
    schedules = _load(path) if path is not None else None
    url = urls.resolve_url(args.database_url)
    with connections.translated_errors(url), connections.connect(url) as conn:
        common.migrate_schema(conn)
        if args.app is None:
            from pgbeat import demo

            demo.seed(conn)
    kinds = [*registry.kinds(), *(s.kind for s in schedules or [])]
    metrics = common.start_metrics(args, url, kinds)
    scheduler = Scheduler(
        url,
        schedules,
        metrics=metrics,
        load=None if path is None else lambda: load_for_reload(path),
        history_retention=args.history_retention,
    )
    worker = Worker(url, registry, common.worker_settings(args), metrics=metrics)
    with (
        common.stop_on_signals([scheduler.stop, worker.stop]),
        handling_reload_signal(scheduler.reload),
    ):
        # a scheduler that dies takes the worker down with it: `pgbeat run` exits non-zero
        # rather than working on without scheduling (its traceback is in the log)
        scheduler.start(on_failure=lambda _: worker.stop())
        try:
            worker.run()
        finally:
            scheduler.stop()
            scheduler.join(timeout=10)
    if scheduler.failure is not None:
        raise PgbeatError(
            f"the scheduler stopped: {type(scheduler.failure).__name__}: "
            f"{types.one_line(str(scheduler.failure))}"
        )
    return 0


def _run_schedules_path(args: argparse.Namespace) -> Path | None:
    """--schedules; else the demo's file; else ./schedules.toml if there is one."""
    if args.schedules:
        return Path(args.schedules)
    if args.app is None:
        return Path(str(resources.files("pgbeat").joinpath("demo", "schedules.toml")))
    default = Path(DEFAULT_SCHEDULES)
    return default if default.exists() else None
