"""The rows ``enqueue`` and ``enqueue_many`` write: a job's checks, run before any SQL (a
``TypeError`` or ``ValueError`` naming the argument, never a broken caller's transaction),
and the parameters of the insert statements.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from pgbeat import flow, job_inputs, limits
from pgbeat.db.literals import number_array, text_array
from pgbeat.jobs import keys
from pgbeat.jobs.keys import OnConflict
from pgbeat.jobs.payloads import (
    DEFAULT_MAX_ATTEMPTS,
    encode_payload,
    max_payload_bytes,
)
from pgbeat.jobs.payloads import encoded as _encoded
from pgbeat.observe import tracing


@dataclass(frozen=True)
class NewJob:
    """One job for ``enqueue_many``."""

    kind: str
    payload: Any = None
    run_at: datetime | None = None
    delay: timedelta | None = None
    unique_key: str | None = None
    max_attempts: int | None = None
    job_key: str | None = None
    on_conflict: OnConflict = "ignore"
    max_wait: timedelta | None = None
    queue: str = flow.DEFAULT_QUEUE
    priority: int = 0
    limit_key: str | None = None
    tags: Sequence[str] | None = None


def insert_params(
    kind: str,
    payload: Any,
    run_at: datetime | None,
    delay: timedelta | None,
    unique_key: str | None,
    max_attempts: int | None,
    queue: str = flow.DEFAULT_QUEUE,
    priority: int = 0,
    limit_key: str | None = None,
    tags: Sequence[str] | None = None,
) -> dict[str, Any]:
    check_job(kind, run_at, delay, max_attempts, unique_key)
    checked_tags = job_inputs.check_tags(tags)
    queue, priority, limit_key = flow.check_flow(queue, priority, limit_key)
    return {
        "queue": queue,
        "priority": priority,
        "limit_key": limit_key,
        "kind": kind,
        "payload": Jsonb(encode_payload(payload), dumps=_encoded),
        "run_at": run_at,
        "delay": delay or timedelta(0),
        "unique_key": unique_key,
        "max_attempts": max_attempts or DEFAULT_MAX_ATTEMPTS,
        "meta": tracing.meta_param(),
        "tags": checked_tags,
    }


def check_job(
    kind: str,
    run_at: datetime | None,
    delay: timedelta | None,
    max_attempts: int | None,
    key: str | None = None,
    key_name: str = "unique_key",
) -> None:
    if not kind or not isinstance(kind, str):
        raise ValueError("a job's kind must be a non-empty string")
    _check_types(run_at, delay, max_attempts)
    limits.check_job_text(kind, key, key_name)
    job_inputs.check_times(run_at, delay)
    if run_at is not None and delay is not None:
        raise ValueError("give run_at or delay, not both")
    if run_at is not None and run_at.tzinfo is None:
        raise ValueError("run_at must be timezone-aware")
    if max_attempts is not None and max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    if max_attempts is not None and max_attempts > limits.MAX_ATTEMPTS:
        raise ValueError(f"max_attempts must be at most {limits.MAX_ATTEMPTS}")


def _check_types(run_at: object, delay: object, max_attempts: object) -> None:
    """A TypeError naming the argument before any SQL (psycopg would fail on the statement,
    aborting the caller's transaction)."""
    if run_at is not None and not isinstance(run_at, datetime):
        raise TypeError(f"run_at must be an aware datetime, not {type(run_at).__name__}")
    if delay is not None and not isinstance(delay, timedelta):
        raise TypeError(
            f"delay must be a timedelta (e.g. timedelta(hours=1)), not {type(delay).__name__}"
        )
    if max_attempts is not None and (
        isinstance(max_attempts, bool) or not isinstance(max_attempts, int)
    ):
        raise TypeError(f"max_attempts must be an int, not {type(max_attempts).__name__}")


def many_params(jobs: Iterable[NewJob]) -> tuple[dict[str, Any], list[keys.KeyedJob]]:
    """The unkeyed jobs as one array literal per column (arrays.py says why); the keyed ones."""
    keyed: list[keys.KeyedJob] = []
    limit = max_payload_bytes()  # read once per call, not per job
    kinds: list[str] = []
    payloads: list[str] = []
    run_ats: list[str | None] = []
    delays: list[str] = []
    unique_keys: list[str | None] = []
    max_attempts: list[str] = []
    queues: list[str | None] = []
    priorities: list[str] = []
    limit_keys: list[str | None] = []
    tags: list[str | None] = []  # each job's as an array literal, NULL for none
    for job in jobs:
        if job.job_key is not None or job.on_conflict != "ignore" or job.max_wait is not None:
            keys.check_keyed(job.job_key, job.unique_key, job.on_conflict, job.max_wait)
            keyed.append(keyed_new_job(job))
            continue
        check_job(job.kind, job.run_at, job.delay, job.max_attempts, job.unique_key)
        kinds.append(job.kind)
        payloads.append(encode_payload(job.payload, limit))
        run_ats.append(None if job.run_at is None else job.run_at.isoformat())
        delays.append("0" if job.delay is None else repr(job.delay.total_seconds()))
        unique_keys.append(job.unique_key)
        max_attempts.append(str(job.max_attempts or DEFAULT_MAX_ATTEMPTS))
        queue, priority, limit_key = flow.check_flow(job.queue, job.priority, job.limit_key)
        queues.append(queue)
        priorities.append(str(priority))
        limit_keys.append(limit_key)
        job_tags = job_inputs.check_tags(job.tags)
        tags.append(None if job_tags is None else text_array(job_tags))
    params = {
        "kinds": text_array(kinds),
        "payloads": text_array(payloads),
        "run_ats": text_array(run_ats),
        "delay_seconds": number_array(delays),
        "unique_keys": text_array(unique_keys),
        "max_attempts": number_array(max_attempts),
        "meta": tracing.meta_param(),
        "queues": text_array(queues),
        "priorities": number_array(priorities),
        "limit_keys": text_array(limit_keys),
        "tags": text_array(tags),
    }
    return params, keyed


def keyed_job(
    kind: str,
    payload: Any,
    run_at: datetime | None,
    delay: timedelta | None,
    max_attempts: int | None,
    job_key: str,
    on_conflict: OnConflict,
    max_wait: timedelta | None,
    flow_fields: tuple[str, int, str | None] = (flow.DEFAULT_QUEUE, 0, None),
) -> keys.KeyedJob:
    check_job(kind, run_at, delay, max_attempts, job_key, "job_key")
    return keys.KeyedJob(
        kind,
        job_key,
        encode_payload(payload),
        run_at,
        delay,
        max_attempts or DEFAULT_MAX_ATTEMPTS,
        on_conflict,
        max_wait,
        *flow_fields,
    )


def keyed_new_job(job: NewJob) -> keys.KeyedJob:
    assert job.job_key is not None  # check_keyed refused the rest
    keyed = keyed_job(
        job.kind,
        job.payload,
        job.run_at,
        job.delay,
        job.max_attempts,
        job.job_key,
        job.on_conflict,
        job.max_wait,
        flow.check_flow(job.queue, job.priority, job.limit_key),
    )
    return replace(keyed, tags=job_inputs.check_tags(job.tags))
