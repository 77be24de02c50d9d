"""``pgbeat queues list|set|pause|resume``: queue limits and pauses, kept in the database.

Each command is one call of ``pgbeat.jobs.queues`` on an autocommit connection: it commits at
once, and every worker's next claim obeys it.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pgbeat.cli import common, types
from pgbeat.db import urls
from pgbeat.flow import UNSET
from pgbeat.jobs import queues
from pgbeat.jobs.queues import QueueSettings

LIMITS = ("concurrency", "key_concurrency", "rate", "key_rate")


def add_commands(commands: Any, common_flags: argparse.ArgumentParser) -> None:
    group = commands.add_parser("queues", help="list queues; set their limits; pause, resume")
    sub = group.add_subparsers(dest="queues_command", metavar="COMMAND", parser_class=type(group))
    sub.required = True

    p = sub.add_parser("list", parents=[common_flags], help="queues, their limits and jobs")
    p.add_argument("--json", action="store_true", help="print a JSON array")
    p.add_argument("--name", metavar="TEXT", help="only queues whose name contains TEXT")
    p.add_argument("--after", metavar="NAME", help="the page after queue NAME (by name)")
    p.add_argument(
        "--limit", type=types.limit, default=queues.LIST_LIMIT, metavar="N", help="page size"
    )
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "set", parents=[common_flags], help="set a queue's limits, cluster-wide ('none' clears)"
    )
    p.add_argument("name", type=types.queue, metavar="NAME")
    for flag, kind, text in (
        ("--concurrency", types.limit, "at most N of the queue's jobs running at once"),
        ("--key-concurrency", types.limit, "at most N running per limit key"),
        ("--rate", types.rate, "at most N starts in any window of DURATION, e.g. 100/10s"),
        ("--key-rate", types.rate, "the same per limit key"),
    ):
        metavar = "N/DURATION" if "rate" in flag else "N"
        p.add_argument(flag, type=kind, default=UNSET, metavar=metavar, help=text)
    fairness = p.add_mutually_exclusive_group()
    fairness.add_argument(
        "--fair",
        dest="fair",
        action="store_true",
        default=UNSET,
        help="take the queue's limit keys in turn among due jobs of one priority",
    )
    fairness.add_argument(
        "--no-fair", dest="fair", action="store_false", help="claim in priority order alone"
    )
    p.set_defaults(func=cmd_set)

    for name, func, text in (
        ("pause", cmd_pause, "pause a queue: none of its jobs starts (running ones finish)"),
        ("resume", cmd_resume, "resume a paused queue"),
    ):
        p = sub.add_parser(name, parents=[common_flags], help=text)
        p.add_argument("name", type=types.queue, metavar="NAME")
        p.set_defaults(func=func)


def cmd_list(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        page = queues.list_queues(conn, name=args.name, after=args.after, limit=args.limit)
    found = page.queues
    if args.json:
        common.print_json([state.as_json() for state in found])
        if page.next_after is not None:  # stdout stays one JSON array
            print(_more(page), file=sys.stderr)
        return 0
    if not found and page.next_after is None:
        print("no queues: no live jobs and no settings")
        return 0
    header = ["NAME", "STATE", "PENDING", "RUNNING", "CONCURRENCY", "KEY CONC.", "RATE"]
    header += ["KEY RATE", "FAIR"]
    rows = [
        [
            _escaped(s.settings.name),  # a name SQL wrote may hold control characters
            _state(s.settings),
            str(s.pending),
            str(s.running),
            *(_shown(getattr(s.settings, limit)) for limit in LIMITS),
            "yes" if s.settings.fair else "-",
        ]
        for s in found
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    for line in (header, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    for s in found:
        if s.settings.problem:
            print(f"queue {s.settings.name!r}: {s.settings.problem}: workers skip it until set")
    if page.next_after is not None:
        print(_more(page))
    return 0


def _more(page: queues.QueuePage) -> str:
    """The line that tells where the next page starts (a filter's search may stop short)."""
    more = f"more: --after {_escaped(page.next_after or '')}"
    if page.searched_to is None:
        return more
    return f"searched the queues up to {_escaped(page.searched_to)}; {more}"


def _state(settings: QueueSettings) -> str:
    if settings.problem:
        return "invalid"
    return "paused" if settings.paused else "running"


def cmd_set(args: argparse.Namespace) -> int:
    named = (*LIMITS, "fair")
    given = {limit: getattr(args, limit) for limit in named if getattr(args, limit) is not UNSET}
    if not given:
        raise ValueError(
            "give at least one of --concurrency, --key-concurrency, --rate, --key-rate,"
            " --fair, --no-fair"
        )
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        settings = queues.configure_queue(conn, args.name, **given)
    print(_summary(settings))
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        queues.pause_queue(conn, args.name)
    print(f"paused queue {args.name}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        queues.resume_queue(conn, args.name)
    print(f"resumed queue {args.name}")
    return 0


def _summary(settings: QueueSettings) -> str:
    limits = ", ".join(f"{limit}={_shown(getattr(settings, limit))}" for limit in LIMITS)
    return f"queue {settings.name}: {limits}, fair={'yes' if settings.fair else 'no'}"


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


def _escaped(name: str) -> str:
    """A queue name as one line of printable text: control characters (ANSI too) escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in name)
