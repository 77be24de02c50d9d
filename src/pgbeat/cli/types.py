"""Argument types of the `pgbeat` command line: text to a value, or a one-line error.

argparse reports an ``ArgumentTypeError`` as ``pgbeat ...: error: argument --x: <message>``.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from pgbeat import flow
from pgbeat.db.schemas import check_schema_name
from pgbeat.durations import parse_duration
from pgbeat.errors import UserError
from pgbeat.flow import Rate
from pgbeat.scheduling.timing import typed_time

MAX_PORT = 65535
MAX_PREVIEW = 10_000
MAX_INT = 2**31 - 1  # PostgreSQL's int: attempts, limits and counts are stored or sent as one


def duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def schema_name(text: str) -> str:
    """--schema: a schema name PostgreSQL reads unquoted (``check_schema_name``)."""
    try:
        return check_schema_name(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    if value > MAX_INT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_INT}, got {value}")
    return value


def preview_count(text: str) -> int:
    """How many fire times to preview: a list meant for reading, not a loop without end."""
    value = positive_int(text)
    if value > MAX_PREVIEW:
        raise argparse.ArgumentTypeError(f"at most {MAX_PREVIEW} at a time, got {value}")
    return value


def port(text: str) -> int:
    """A TCP port to listen on: 1-65535 (socket.bind raises OverflowError beyond)."""
    value = positive_int(text)
    if value > MAX_PORT:
        raise argparse.ArgumentTypeError(f"a port is at most {MAX_PORT}, got {value}")
    return value


def aware_datetime(text: str) -> datetime:
    """A time about no schedule (``enqueue --at``): an offset is required (typed_time)."""
    try:
        return typed_time(text, None)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def schedule_time(text: str) -> str:
    """A time about one schedule (``--after``, ``--from``, ``--to``), checked as ISO-8601 here
    and read by the command with ``typed_time`` in the schedule's zone when it has no offset."""
    try:
        typed_time(text, UTC)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def json_payload(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"bad JSON payload: {exc}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError("bad JSON payload: nested too deeply") from None


def kinds_list(text: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    if not kinds:
        raise argparse.ArgumentTypeError("expected a comma-separated list of kinds")
    return kinds


def queues_list(text: str) -> tuple[str, ...]:
    queues = tuple(q.strip() for q in text.split(",") if q.strip())
    if not queues:
        raise argparse.ArgumentTypeError("expected a comma-separated list of queues")
    for queue in queues:
        problem = flow.queue_problem(queue)
        if problem is not None:
            raise argparse.ArgumentTypeError(f"queue {queue[:40]!r}: {problem}")
    return queues


def rate(text: str) -> Rate | None:
    """A rate ``N/DURATION``, or ``none`` (clear it)."""
    if text.strip().lower() == "none":
        return None
    try:
        return flow.parse_rate(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def limit(text: str) -> int | None:
    """A concurrency limit (a whole number from 1), or ``none`` (clear it)."""
    if text.strip().lower() == "none":
        return None
    return positive_int(text)


def priority(text: str) -> int:
    try:
        return flow.check_priority(int(text))
    except ValueError as exc:
        if "between" in str(exc):
            raise argparse.ArgumentTypeError(str(exc)) from None
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def queue(text: str) -> str:
    problem = flow.queue_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"queue {text[:40]!r}: {problem}")
    return text


def one_line(message: str) -> str:
    """A message as one line of printable text; control characters (ANSI too) escaped."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    text = "; ".join(lines) if lines else "unknown error"
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
