"""``pgbeat enqueue`` and ``pgbeat jobs ...``: putting jobs in, and the operator's view.

stats, list, show, retry, cancel and purge are each a thin wrapper around ``admin``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg

from pgbeat.cli import common, types
from pgbeat.cli.common import print_json
from pgbeat.db import guarded, urls
from pgbeat.errors import JobNotFound, UserError
from pgbeat.jobs import actions, enqueue, keys, reads


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    p = commands.add_parser("enqueue", parents=[common], help="enqueue one job; prints its id")
    p.add_argument("kind", metavar="KIND")
    p.add_argument("--payload", type=types.json_payload, default={}, help="JSON (default {})")
    when = p.add_mutually_exclusive_group()
    when.add_argument(
        "--in",
        dest="delay",
        type=types.duration,
        metavar="DURATION",
        help="run after this delay, e.g. 24h",
    )
    when.add_argument(
        "--at",
        dest="run_at",
        type=types.aware_datetime,
        metavar="ISO-8601",
        help="run at this time, e.g. 2026-12-01T09:00:00+01:00",
    )
    p.add_argument("--unique-key", metavar="KEY")
    p.add_argument("--max-attempts", type=types.positive_int, metavar="N")
    p.add_argument(
        "--job-key", metavar="KEY", help="names the live job of this kind (pending or running)"
    )
    p.add_argument(
        "--on-conflict",
        choices=keys.ON_CONFLICT_MODES,
        default="ignore",
        help="when the job key's job is live (default ignore)",
    )
    p.add_argument(
        "--max-wait",
        type=types.duration,
        metavar="DURATION",
        help="with --job-key: replaces never push run_at past the first request + this",
    )
    p.add_argument("--queue", type=types.queue, default="default", help="(default 'default')")
    p.add_argument(
        "--priority",
        type=types.priority,
        default=0,
        metavar="N",
        help="higher runs first among due jobs, -32768..32767 (default 0)",
    )
    p.add_argument("--limit-key", metavar="KEY", help="what the queue's per-key limits count by")
    p.add_argument(
        "--tag",
        dest="tags",
        action="append",
        metavar="TAG",
        help="a label to filter jobs by (repeat for several)",
    )
    p.set_defaults(func=cmd_enqueue)

    jobs = commands.add_parser("jobs", help="inspect and manage jobs")
    sub = jobs.add_subparsers(dest="jobs_command", metavar="COMMAND", parser_class=type(jobs))
    sub.required = True

    p = sub.add_parser("stats", parents=[common], help="counts by status and kind, backlog")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("list", parents=[common], help="the newest jobs")
    p.add_argument("--status", choices=actions.STATUSES)
    p.add_argument("--kind")
    p.add_argument("--tag", metavar="TAG", help="only jobs that have this tag")
    p.add_argument("--limit", type=types.positive_int, default=50, metavar="N")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", parents=[common], help="everything about one job")
    p.add_argument("id", type=_job_id, metavar="ID")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("retry", parents=[common], help="back to pending, attempts reset")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("id", type=_job_id, nargs="?", metavar="ID")
    target.add_argument("--failed", action="store_true", help="every failed job")
    p.add_argument("--kind", help="with --failed: only this kind")
    p.set_defaults(func=cmd_retry)

    p = sub.add_parser(
        "cancel",
        parents=[common],
        help="a pending job is cancelled, a running one stopped; by id, or by kind and key",
    )
    p.add_argument("id", type=_job_id, nargs="?", metavar="ID")
    p.add_argument("--kind", help="with --key: the kind of the job")
    p.add_argument(
        "--key", metavar="KEY", help="the live job with this job key (pending or running)"
    )
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("purge", parents=[common], help="delete old finished jobs, in batches")
    p.add_argument("--older-than", type=types.duration, required=True, metavar="DURATION")
    p.add_argument(
        "--status",
        type=_finished_statuses,
        default=actions.FINISHED,
        metavar="done,failed,cancelled",
    )
    p.set_defaults(func=cmd_purge)


def _job_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a job id is a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a job id is positive, got {value}")
    return value


def _finished_statuses(text: str) -> tuple[str, ...]:
    statuses = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [s for s in statuses if s not in actions.FINISHED]
    if not statuses or bad:
        raise argparse.ArgumentTypeError(f"purge takes done, failed and/or cancelled, got {text!r}")
    return statuses


@contextmanager
def _connection(args: argparse.Namespace) -> Iterator[psycopg.Connection[Any]]:
    with common.migrated_database(urls.resolve_url(args.database_url)) as conn:
        yield conn


def cmd_enqueue(args: argparse.Namespace) -> int:
    if args.job_key is not None and args.unique_key is not None:
        raise UserError("give --job-key or --unique-key, not both")
    if args.job_key is None and (args.on_conflict != "ignore" or args.max_wait is not None):
        raise UserError("--on-conflict and --max-wait go with --job-key")
    with _connection(args) as conn:
        job_id = enqueue.enqueue(
            conn,
            args.kind,
            args.payload,
            run_at=args.run_at,
            delay=args.delay,
            unique_key=args.unique_key,
            max_attempts=args.max_attempts,
            job_key=args.job_key,
            on_conflict=args.on_conflict,
            max_wait=args.max_wait,
            queue=args.queue,
            priority=args.priority,
            limit_key=args.limit_key,
            tags=args.tags,
        )
    if job_id is None:
        what = (
            f"job key {args.job_key!r} is live (pending or running)"
            if args.job_key is not None
            else f"unique key {args.unique_key!r} already exists"
        )
        print(f"a {args.kind} job with {what}", file=sys.stderr)
        return 0
    print(job_id)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _connection(args) as conn:
        stats = actions.stats(conn)
    if args.json:
        print_json(
            {
                "by_status": stats.totals(),
                "by_status_and_kind": stats.counts,
                "due_unclaimed": stats.due_unclaimed,
                "oldest_due_age_seconds": stats.oldest_due_age_s,
                "failed_last_hour": stats.failed_last_hour,
            }
        )
        return 0
    totals = stats.totals()
    print("  ".join(f"{status}: {totals[status]}" for status in actions.STATUSES))
    print(
        f"due and unclaimed: {stats.due_unclaimed}   oldest waiting: "
        f"{actions.age_text(stats.oldest_due_age_s)}   failed in the last hour: "
        f"{stats.failed_last_hour}"
    )
    kinds = sorted({kind for by_kind in stats.counts.values() for kind in by_kind})
    if kinds:
        print(f"\n{'kind':<24}" + "".join(f"{s:>10}" for s in actions.STATUSES))
        for kind in kinds:
            row = "".join(f"{stats.counts.get(s, {}).get(kind, 0):>10}" for s in actions.STATUSES)
            print(f"{kind:<24}{row}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with _connection(args) as conn:
        rows = reads.list_jobs(
            conn, status=args.status, kind=args.kind, limit=args.limit, tag=args.tag
        )
    if args.json:
        print_json([reads.as_json(row) for row in rows])
    else:
        print(f"{'id':>8}  {'kind':<20} {'status':<9} {'tries':>5}  {'run_at':<25} last_error")
        for row in rows:
            run_at = row["run_at"]
            shown = f"{run_at:%Y-%m-%d %H:%M:%S%z}" if isinstance(run_at, datetime) else "?"
            print(
                f"{row['id']:>8}  {row['kind'][:20]:<20} {row['status']:<9} "
                f"{row['attempts']:>2}/{row['max_attempts']:<2}  {shown:<24}  "
                f"{row['error_line'][:60]}{_tags_text(row['tags'])}"
            )
    for row in rows:  # shown as far as it goes; named here
        if problem := guarded.unreadable(row):
            print(f"pgbeat: job {row['id']}: {problem}", file=sys.stderr)
    return 0


def _tags_text(tags: list[str] | None) -> str:
    """A job's tags for a terminal: free text, so control characters are escaped."""
    if not tags:
        return ""
    shown = ("".join(c if c.isprintable() else repr(c)[1:-1] for c in tag) for tag in tags)
    return "  [" + ", ".join(shown) + "]"


def cmd_show(args: argparse.Namespace) -> int:
    with _connection(args) as conn:
        shown = reads.show_job(conn, args.id)
    if args.json:
        print_json(
            {
                **reads.as_json(shown.job),
                "run_seconds": shown.run_seconds,
                "schedule": shown.schedule,
                "waiting_for_parents": shown.waiting_for_parents,
                "recorded_attempts": [reads.as_json(a) for a in shown.attempts],
            }
        )
        return 0
    for key, value in shown.job.items():
        if isinstance(value, guarded.Unreadable):
            print(f"{key}: (cannot be read: {value})")
            continue
        if key in ("payload", "meta") or (key == "result" and value is not None):
            value = json.dumps(value)
        if key == "last_error" and value:
            print("last_error:")
            for line in str(value).splitlines():
                print(f"    {line}")
            continue
        print(f"{key}: {'-' if value is None else value}")
    if shown.schedule is not None:
        print(f"schedule: {shown.schedule}")
    if shown.waiting_for_parents:
        print("waiting: for its parents (run_at is the held steps' placeholder)")
    if shown.run_seconds is not None:
        print(f"run: {shown.run_seconds:.3f}s")
    for attempt in shown.attempts:
        print(
            f"attempt {attempt['attempt']}: {attempt['outcome']} at {attempt['finished_at']}"
            f"  {attempt['error_line']}"
        )
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    if args.kind and not args.failed:
        raise UserError("--kind goes with --failed")
    with _connection(args) as conn:
        if args.failed:
            retried = actions.retry_failed(conn, args.kind)
            print(f"{len(retried.ids)} failed jobs back to pending")
            if retried.kept:
                print(
                    f"{retried.kept} stay failed: one job per job key comes back, if none is live"
                )
            return 0
        actions.retry_job(conn, args.id)
    print(f"job {args.id} back to pending")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    by_key = args.kind is not None or args.key is not None
    if by_key == (args.id is not None) or (by_key and (args.kind is None or args.key is None)):
        raise UserError("give a job ID, or --kind and --key")
    reason = f"pgbeat jobs cancel, by {_operator()}"
    with _connection(args) as conn:
        if not by_key:
            if actions.cancel_job(conn, args.id, reason).previous_status == "running":
                print(f"job {args.id} is running: its handler is told to stop; it ends cancelled")
            else:
                print(f"job {args.id} cancelled")
            return 0
        cancelled = keys.cancel(conn, args.kind, args.key, reason=reason)
    if cancelled is None:
        raise JobNotFound(f"no live {args.kind} job with job key {args.key!r}")
    if cancelled.was_running:
        print(
            f"job {cancelled.id} is running: its handler is told to stop, it ends cancelled, "
            "and its key is free"
        )
    else:
        print(f"job {cancelled.id} cancelled")
    return 0


def _operator() -> str:
    """Who runs this command, for the record a cancel leaves: user@host."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (some containers)
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def cmd_purge(args: argparse.Namespace) -> int:
    with _connection(args) as conn:
        deleted = actions.purge_jobs(conn, args.older_than, args.status)
    print(f"deleted {deleted} jobs")
    return 0
