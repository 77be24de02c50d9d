"""A tick's claim as the scheduler runs it, and what it tells the logs and metrics.

The claim is one transaction (periods.py); when the database refuses it for the values of
some period, each schedule is claimed alone so the others still go on. Kept apart from the
loop (scheduler.py), which only decides when to tick.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import psycopg

from pgbeat.db.connections import is_connection_failure, is_data_error
from pgbeat.observe.metrics import Metrics
from pgbeat.scheduling.catalog import Catalog
from pgbeat.scheduling.groups import Group
from pgbeat.scheduling.periods import Claims, PeriodBatch
from pgbeat.scheduling.planning import Plan

log = logging.getLogger("pgbeat.scheduler")


def claim(conn: psycopg.Connection[Any], catalog: Catalog, made: Plan, replica: str) -> Claims:
    """Claim the plan's periods in one transaction, or schedule by schedule if need be.

    When the database refuses the statement for the values of some period (a data
    error, not a lost connection nor a missing table), each schedule is claimed alone:
    the one it refuses is logged and skipped this tick, and the others go on.
    """
    try:
        return made.batch.claim(conn, replica)
    except Exception as exc:
        if is_connection_failure(exc, conn) or not is_data_error(exc):
            raise
        log.warning(
            "the tick's periods were refused (%s); claiming them schedule by schedule",
            first_line(exc),
        )
    claims = Claims()
    for group, due, missed in made.periods:
        for name, member in group.members.items():
            alone = PeriodBatch(catalog.templates.by_number)
            own = Group(policy=group.policy, members={name: member}, last_tick=group.last_tick)
            alone.add(own, due, missed)
            try:
                _merge(claims, alone.claim(conn, replica))
            except Exception as exc:
                if is_connection_failure(exc, conn) or not is_data_error(exc):
                    raise
                log.error(
                    "schedule %s: the database refused its periods, skipped this tick: %s",
                    name,
                    first_line(exc),
                    extra={"schedule": name, "kind": member.kind},
                )
    for keys in (claims.inserted, claims.existing, claims.skipped, claims.missed):
        keys.sort()
    return claims


def report(claims: Claims, metrics: Metrics, catalog: Catalog, took: float = 0.0) -> None:
    """Count each schedule's periods (new or present); log one summary line per tick that
    did something (INFO), and a line per period at DEBUG.

    At 10,000 schedules a line per period was 10,000 INFO lines a minute: an unread pipe
    once blocked the process on them.
    """
    for name, (new, old) in claims.counts.items():
        metrics.periods(name, new, old)
    for name in claims.paused:
        log.warning(
            "schedule %s paused itself: its last periods failed (resume it when fixed)",
            name,
            extra={"schedule": name, "kind": catalog.kind(name)},
        )
    sorts = (
        ("enqueued", claims.inserted),
        ("skipped", claims.skipped),
        ("missed", claims.missed),
        ("buffered", claims.buffered),
        ("enqueued after waiting", claims.released),
    )
    if log.isEnabledFor(logging.INFO):
        summary = tick_summary(sorts, len(claims.cancelled))
        if summary:
            log.info("tick: %s in %.1fms", summary, took * 1000, extra=_counts(claims, took))
    if log.isEnabledFor(logging.DEBUG):
        for label, keys in sorts:
            for key in keys:
                log.debug("%s %s", label, key, extra=_fields(catalog, key))
        for key in claims.existing:
            log.debug("already enqueued %s", key, extra=_fields(catalog, key))
        if claims.cancelled:
            log.debug("asked jobs %s to stop: later periods replaced them", claims.cancelled)


SUMMARY_KEYS = 3  # a kind of outcome with at most this many periods names them


def tick_summary(sorts: Sequence[tuple[str, Sequence[str]]], cancelled: int) -> str:
    """``3 enqueued (a@..., b@..., c@...), 10000 skipped``: each outcome that happened,
    counted, its keys named when there are few; '' for a tick that did nothing."""
    parts = []
    for label, keys in sorts:
        if keys:
            named = f" ({', '.join(keys)})" if len(keys) <= SUMMARY_KEYS else ""
            parts.append(f"{len(keys)} {label}{named}")
    if cancelled:
        parts.append(f"{cancelled} asked to stop (cancel_other)")
    return ", ".join(parts)


def _counts(claims: Claims, took: float) -> dict[str, Any]:
    """The summary's numbers as fields of a JSON log line."""
    return {
        "enqueued": len(claims.inserted),
        "skipped": len(claims.skipped),
        "missed": len(claims.missed),
        "buffered": len(claims.buffered),
        "released": len(claims.released),
        "cancelled": len(claims.cancelled),
        "took_ms": round(took * 1000, 1),
    }


def first_line(exc: BaseException) -> str:
    """An error's first line, at most 500 characters, for a log line."""
    return str(exc).strip().partition("\n")[0][:500] or type(exc).__name__


def _fields(catalog: Catalog, key: str) -> dict[str, Any]:
    name = key.partition("@")[0]
    return {"schedule": name, "kind": catalog.kind(name), "unique_key": key}


def _merge(claims: Claims, more: Claims) -> None:
    """Add one schedule's claims to the tick's."""
    claims.inserted += more.inserted
    claims.existing += more.existing
    claims.skipped += more.skipped
    claims.missed += more.missed
    claims.buffered += more.buffered
    claims.paused += more.paused
    claims.cancelled += more.cancelled
    claims.counts.update(more.counts)
