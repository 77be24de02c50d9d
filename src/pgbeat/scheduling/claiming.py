"""A tick's claim as the scheduler runs it, and what it tells the logs and metrics.

The claim is one transaction (periods.py); when the database refuses it for the values of
some period, each schedule is claimed alone so the others still go on. Kept apart from the
loop (scheduler.py), which only decides when to tick.
"""

from __future__ import annotations

import logging
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


def report(claims: Claims, metrics: Metrics, catalog: Catalog) -> None:
    """Count each schedule's periods (new or present) and log them when asked to."""
    for name, (new, old) in claims.counts.items():
        metrics.periods(name, new, old)
    for name in claims.paused:
        log.warning(
            "schedule %s paused itself: its last periods failed (resume it when fixed)",
            name,
            extra={"schedule": name, "kind": catalog.kind(name)},
        )
    if claims.cancelled:
        log.info("asked jobs %s to stop: later periods replaced them", claims.cancelled)
    if log.isEnabledFor(logging.INFO):
        for label, keys in (
            ("enqueued", claims.inserted),
            ("skipped", claims.skipped),
            ("missed", claims.missed),
            ("buffered", claims.buffered),
            ("enqueued after waiting", claims.released),
        ):
            for key in keys:
                log.info("%s %s", label, key, extra=_fields(catalog, key))
    if log.isEnabledFor(logging.DEBUG):
        for key in claims.existing:
            log.debug("already enqueued %s", key, extra=_fields(catalog, key))


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
