"""Queue settings from code: limits, pause and resume, in the caller's transaction.

Each call is one statement on the caller's connection (a psycopg, SQLAlchemy or Django one,
sync or async), run by the plan runner of db/runner.py; values are checked before it runs.
The claim enforces the settings (docs/flow-control.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import psycopg

from pgbeat import flow
from pgbeat.db.runner import Plan, async_aware, run, run_on_async
from pgbeat.db.sql import queues as queue_sql
from pgbeat.db.sql.jobs import dashboard as dashboard_sql

_NAMES = ("concurrency", "key_concurrency", "rate", "key_rate", "fair")
LIST_LIMIT = 100  # queues on one page of list_queues
# Queues with pending jobs a filtered page walks at most (a probe of an index each; its cost
# in docs/benchmarks.md): a filter that few of many queues match answers in a few pages of
# bounded cost.
SEARCH_SPAN = 5_000
OLDEST_SHOWN = 5  # queues the overview names, by their oldest due job
OLDEST_SCANNED = 1_000  # due jobs it reads at most to find each next queue


@dataclass(frozen=True)
class QueueSettings:
    """A queue's settings as stored; rates as ``"N/D"`` text, None where no limit is set."""

    name: str
    paused: bool
    concurrency: int | None
    key_concurrency: int | None
    rate: str | None
    key_rate: str | None
    fair: bool = False
    problem: str | None = None  # why the row is invalid (written by SQL before 0019)


def settings_from_row(row: tuple[Any, ...]) -> QueueSettings:
    """A pgbeat_queues row (as the statements here return it) as QueueSettings; an
    invalid row's periods come NULL from the statement, its limits are shown as stored."""
    name, paused, concurrency, key_concurrency, rate_n, rate_d, key_rate_n, key_rate_d = row[:8]
    fair, problem = row[8:10]
    return QueueSettings(
        name,
        bool(paused),
        concurrency,
        key_concurrency,
        flow.rate_text(rate_n, rate_d),
        flow.rate_text(key_rate_n, key_rate_d),
        bool(fair),
        problem,
    )


def configure_plan(name: str, given: dict[str, Any]) -> Plan[QueueSettings]:
    """Set the limits in ``given`` (checked: flow.merged_limits) on queue ``name``."""
    limits = flow.merged_limits(flow.QueueLimits(), **_limits(given))
    rate, key_rate = limits.rate, limits.key_rate
    params: dict[str, Any] = {
        "name": name,
        "set": list(given),
        "fair": given.get("fair"),
        "concurrency": limits.concurrency,
        "key_concurrency": limits.key_concurrency,
        "rate_count": rate.count if rate else None,
        "rate_period": rate.period if rate else None,
        "key_rate_count": key_rate.count if key_rate else None,
        "key_rate_period": key_rate.period if key_rate else None,
    }
    rows = yield queue_sql.QUEUES_CONFIGURE, params
    return settings_from_row(rows[0])


def pause_plan(name: str, paused: bool) -> Plan[QueueSettings]:
    rows = yield queue_sql.QUEUES_SET_PAUSED, {"name": name, "paused": paused}
    return settings_from_row(rows[0])


def _limits(given: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in given.items() if name != "fair"}


def _given(**values: Any) -> dict[str, Any]:
    """The settings a caller named, checked before any statement runs."""
    given = {name: value for name, value in values.items() if value is not flow.UNSET}
    if not given:
        raise ValueError(f"give at least one of {', '.join(_NAMES)}")
    if "fair" in given and not isinstance(given["fair"], bool):
        raise TypeError(f"fair must be True or False, got {type(given['fair']).__name__}")
    flow.merged_limits(flow.QueueLimits(), **_limits(given))
    return given


@async_aware("configure_queue_async")
def configure_queue(
    conn: psycopg.Connection[Any],
    name: str,
    *,
    concurrency: int | None = flow.UNSET,
    key_concurrency: int | None = flow.UNSET,
    rate: str | flow.Rate | None = flow.UNSET,
    key_rate: str | flow.Rate | None = flow.UNSET,
    fair: bool = flow.UNSET,
) -> QueueSettings:
    """Set limits of queue ``name``, cluster-wide; the limits not named stay as they are.

    ``concurrency``: at most N of the queue's jobs running at once; ``key_concurrency``: at
    most N running per ``limit_key``; ``rate="N/D"`` (e.g. ``"100/10s"``): at most N starts
    in any window of length D; ``key_rate``: the same per ``limit_key``. ``None`` clears a
    limit. ``fair=True``: among the queue's due jobs of one priority, the claim takes the
    limit keys in turn (jobs without a key form one key). Runs in ``conn``'s transaction;
    an async connection returns the coroutine of ``configure_queue_async``.
    """
    limits = {"concurrency": concurrency, "key_concurrency": key_concurrency, "fair": fair}
    return run(conn, _configure(name, rate=rate, key_rate=key_rate, **limits))


async def configure_queue_async(
    conn: object,
    name: str,
    *,
    concurrency: int | None = flow.UNSET,
    key_concurrency: int | None = flow.UNSET,
    rate: str | flow.Rate | None = flow.UNSET,
    key_rate: str | flow.Rate | None = flow.UNSET,
    fair: bool = flow.UNSET,
) -> QueueSettings:
    """``configure_queue`` on an async connection."""
    limits = {"concurrency": concurrency, "key_concurrency": key_concurrency, "fair": fair}
    return await run_on_async(conn, _configure(name, rate=rate, key_rate=key_rate, **limits))


def _configure(name: str, **limits: Any) -> Plan[QueueSettings]:
    """The configure plan, its values checked before any SQL."""
    flow.check_queue(name)
    return configure_plan(name, _given(**limits))


@async_aware("pause_queue_async")
def pause_queue(conn: psycopg.Connection[Any], name: str) -> QueueSettings:
    """Pause queue ``name``: no job of it starts (running ones finish) until ``resume_queue``."""
    return run(conn, _pause(name, True))


async def pause_queue_async(conn: object, name: str) -> QueueSettings:
    """``pause_queue`` on an async connection."""
    return await run_on_async(conn, _pause(name, True))


@async_aware("resume_queue_async")
def resume_queue(conn: psycopg.Connection[Any], name: str) -> QueueSettings:
    """Resume a paused queue ``name``."""
    return run(conn, _pause(name, False))


async def resume_queue_async(conn: object, name: str) -> QueueSettings:
    """``resume_queue`` on an async connection."""
    return await run_on_async(conn, _pause(name, False))


def _pause(name: str, paused: bool) -> Plan[QueueSettings]:
    flow.check_queue(name)
    return pause_plan(name, paused)


@dataclass(frozen=True)
class QueueState:
    """A queue's settings and its pending and running jobs, as `pgbeat queues list` shows."""

    settings: QueueSettings
    pending: int
    running: int

    def as_json(self) -> dict[str, Any]:
        """The settings (``problem`` only for a row the constraints refuse) and counts."""
        shown = asdict(self.settings)
        if shown["problem"] is None:
            del shown["problem"]
        return {**shown, "pending": self.pending, "running": self.running}


@dataclass(frozen=True)
class QueuePage:
    """One page of ``list_queues``: its queues, and where the next page starts (None: this
    is the last). ``searched_to`` is set when a name filter's search stopped at that queue
    before the end (SEARCH_SPAN queues walked): the page holds every match up to it only."""

    queues: list[QueueState]
    next_after: str | None
    searched_to: str | None = None


def list_queues(
    conn: psycopg.Connection[Any],
    *,
    name: str | None = None,
    after: str | None = None,
    limit: int = LIST_LIMIT,
    span: int | None = None,
) -> QueuePage:
    """One page of the queues with settings or live jobs, by name: those after ``after``
    whose name contains ``name`` (any case), at most ``limit`` (an operator's view).

    Its cost follows the page, not the number of queues: at most ``limit`` queues are
    counted, and a name filter looks at ``span`` (SEARCH_SPAN, never less than ``limit``)
    queues with pending jobs at most before it answers (``QueuePage.searched_to``; the next
    page searches on)."""
    span = max(SEARCH_SPAN if span is None else span, limit)
    params = {"name": name or None, "after": after, "limit": limit, "span": span}
    rows = conn.execute(queue_sql.QUEUES_LIST, params).fetchall()
    found = [
        QueueState(settings_from_row(tuple(row)), row[10], row[11])
        for row in rows
        if row[0] is not None  # the one row of an empty page
    ]
    searched_to = rows[0][12] if rows else None
    if len(found) == limit:
        return QueuePage(found, found[-1].settings.name)
    return QueuePage(found, searched_to, searched_to)


def running_keys(
    conn: psycopg.Connection[Any], name: str, limit: int = 20
) -> list[tuple[str, int]]:
    """The limit keys of queue ``name`` with running jobs, busiest first."""
    rows = conn.execute(dashboard_sql.QUEUES_RUNNING_KEYS, {"name": name, "limit": limit})
    return [(key, int(count)) for key, count in rows.fetchall()]


@dataclass(frozen=True)
class QueueWait:
    """A queue with due jobs, as the overview names it: when its oldest due job became due,
    how long it has waited (seconds), and whether the queue is paused (why it waits)."""

    name: str
    oldest_due_at: datetime | None
    waits_s: float | None
    paused: bool


def oldest_due_queues(
    conn: psycopg.Connection[Any], limit: int = OLDEST_SHOWN, scan: int = OLDEST_SCANNED
) -> list[QueueWait]:
    """The queues of the oldest due jobs, oldest first, at most ``limit``: each the queue of
    the oldest due job of a queue not named yet, looked for among the next ``scan`` due
    jobs, so the read is bounded however many queues there are (fewer than ``limit`` when
    one queue's backlog fills a look). A workflow step waiting for its parents is not due,
    so its wait never reads as queue delay."""
    rows = conn.execute(queue_sql.QUEUES_OLDEST_DUE, {"limit": limit, "scan": scan})
    return [QueueWait(str(name), due, waits, bool(paused)) for name, due, waits, paused in rows]
