"""The queue's statements as a worker runs them: claim (claiming.py), complete, retry, snooze,
fail, release, renew, reap.

One statement each, on the worker's own connections in autocommit. No loops, no sleeping.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import psycopg
from psycopg.types.json import set_json_loads

from pgbeat.db.literals import number_array
from pgbeat.db.sql import attempts as attempt_sql
from pgbeat.db.sql.jobs import outcomes as outcome_sql
from pgbeat.job import Job
from pgbeat.worker.claiming import Claimer

ERROR_TEXT_LIMIT = 10_000  # last_error keeps the head of a huge message, not 10 MB of it
MAX_RETRY_DELAY = timedelta(days=36_525)  # a century: a retry later than that is clamped
EARLIEST_RUN_AT = datetime(1900, 1, 1, tzinfo=UTC)
LATEST_RUN_AT = datetime(9000, 1, 1, tzinfo=UTC)

_decode_json = json.JSONDecoder().decode


def load_payload(data: str | bytes) -> Any:
    """A claimed payload: ``{}`` (the default, and most scheduled jobs) without parsing.

    Registered on the worker's connection: ``json.loads`` on bytes first sniffs their
    encoding in Python, a visible share of a busy worker's loop.
    """
    if data == b"{}" or data == "{}":
        return {}
    return _decode_json(data if isinstance(data, str) else data.decode())


def use_fast_payloads(conn: psycopg.Connection[Any]) -> None:
    """Decode json/jsonb columns on ``conn`` with ``load_payload``."""
    set_json_loads(load_payload, conn)


def claim_jobs(
    conn: psycopg.Connection[Any],
    limit: int,
    lease: timedelta,
    kinds: Sequence[str] | None,
    queues: Sequence[str] | None = None,
) -> list[Job]:
    """Lease up to ``limit`` due jobs within every queue's limits (claiming.py), committed
    at once (``conn`` is in autocommit); a row that cannot be read is failed, not returned."""
    return Claimer(lease, kinds, queues).claim(conn, limit)


def seconds_to_next_job(
    conn: psycopg.Connection[Any],
    kinds: Sequence[str] | None,
    queues: Sequence[str] | None = None,
) -> float | None:
    """Seconds (by the database clock) until the earliest pending job of an unlimited queue
    is due; None if none."""
    return Claimer(timedelta(0), kinds, queues).seconds_to_next(conn)


class Renewal(NamedTuple):
    """A held run's answer to a renewal round: asked to stop; its lease extended."""

    stop: bool
    renewed: bool


class EndedRuns(set[int]):
    """The ids of runs that ended cancelled instead; ``steps`` says whether a workflow
    step was among the runs that ended (its advance may have released dependants)."""

    steps = False


def complete_jobs(
    conn: psycopg.Connection[Any] | psycopg.Cursor[Any],
    jobs: Sequence[Job],
    results: Sequence[str | None] = (),
) -> EndedRuns:
    """Mark these runs done with their results (JSON text or None, ``results[i]`` is
    ``jobs[i]``'s), in the one statement; return the ids that ended cancelled instead.
    ``conn`` may be a cursor of the connection, kept by the caller (db/kept_cursor.py).

    Runs whose job was claimed again since are left alone.
    """
    if any(result is not None for result in results) and len(results) != len(jobs):
        raise ValueError("complete_jobs needs one result (or None) per job")
    stored = results_object(jobs, results)
    return _ended(conn.execute(outcome_sql.JOBS_COMPLETE, {**_fences(jobs), "results": stored}))


def results_object(jobs: Sequence[Job], results: Sequence[str | None]) -> str | None:
    """The results of a batch as one JSON object text, ``{"<id>": <result>, ...}``; None
    when no run returned anything (the common case costs nothing)."""
    given = zip(jobs, results, strict=False)  # no results at all: an empty sequence
    pairs = [f'"{job.id}":{result}' for job, result in given if result is not None]
    return "{" + ",".join(pairs) + "}" if pairs else None


def retry_jobs(
    conn: psycopg.Connection[Any],
    retries: Sequence[tuple[Job, str, datetime | timedelta]],
) -> set[int]:
    """Put failed runs back to pending at an absolute time or after a delay; return the ids
    that ended cancelled instead (superseded, or asked to stop)."""
    return _cancelled(
        conn.execute(
            outcome_sql.JOBS_RETRY,
            {
                **_fences([job for job, _, _ in retries]),
                "errors": [truncate_error(error) for _, error, _ in retries],
                **_times([when for _, _, when in retries]),
            },
        )
    )


def snooze_jobs(
    conn: psycopg.Connection[Any], snoozes: Sequence[tuple[Job, datetime | timedelta]]
) -> set[int]:
    """Put snoozed runs back to pending at their time, the attempt given back; return the
    ids that ended cancelled instead."""
    return _cancelled(
        conn.execute(
            outcome_sql.JOBS_SNOOZE,
            {**_fences([job for job, _ in snoozes]), **_times([when for _, when in snoozes])},
        )
    )


def _times(whens: Sequence[datetime | timedelta]) -> dict[str, list[Any]]:
    """Retry times as the two parallel arrays the statements take: absolute, or delays."""
    return {
        "run_ats": [writable_retry_time(w) if isinstance(w, datetime) else None for w in whens],
        "delays": [writable_retry_time(w) if isinstance(w, timedelta) else None for w in whens],
    }


def fail_jobs(conn: psycopg.Connection[Any], failures: Sequence[tuple[Job, str]]) -> EndedRuns:
    """Park these runs in the ``failed`` dead letter with their error; return the ids that
    ended cancelled instead (asked to stop)."""
    return _ended(
        conn.execute(
            outcome_sql.JOBS_FAIL,
            {
                **_fences([job for job, _ in failures]),
                "errors": [truncate_error(error) for _, error in failures],
            },
        )
    )


def stop_jobs(conn: psycopg.Connection[Any], stops: Sequence[tuple[Job, str]]) -> set[int]:
    """End runs stopped for a cancel: cancelled where the database holds the request, the
    others released (a cancel notification is only a hint); return the ids that ended
    cancelled."""
    return _cancelled(
        conn.execute(
            outcome_sql.JOBS_STOP,
            {
                **_fences([job for job, _ in stops]),
                "errors": [truncate_error(error) for _, error in stops],
            },
            prepare=False,
        )
    )


def release_jobs(conn: psycopg.Connection[Any], jobs: Sequence[Job]) -> set[int]:
    """Return unfinished runs to pending at shutdown, without charging their attempt; return
    the ids that ended cancelled instead."""
    return _cancelled(conn.execute(outcome_sql.JOBS_RELEASE, _fences(jobs), prepare=False))


def renew_leases(
    conn: psycopg.Connection[Any], jobs: Sequence[Job], lease: timedelta
) -> dict[int, Renewal]:
    """Extend the leases of these runs by ``lease`` from the database clock, in one statement.

    Returns, for each run still holding its job, whether someone asked it to stop and
    whether its lease was extended (not when another statement held its row's lock: the
    next round renews it); a run missing from the answer lost its job (reaped, and maybe
    claimed again).
    """
    params = {**_fences(jobs), "lease": lease}
    rows = conn.execute(outcome_sql.JOBS_RENEW, params, prepare=False).fetchall()  # never kept
    return {int(job_id): Renewal(bool(stop), bool(renewed)) for job_id, stop, renewed in rows}


def _cancelled(cursor: psycopg.Cursor[Any]) -> set[int]:
    row = cursor.fetchone()
    return set() if row is None else {int(job_id) for job_id in row[0]}


def _ended(cursor: psycopg.Cursor[Any]) -> EndedRuns:
    """The answer of a statement ending runs (outcomes.py's _ALL_ENDED)."""
    row = cursor.fetchone()
    ended = EndedRuns() if row is None else EndedRuns(int(job_id) for job_id in row[0])
    ended.steps = row is not None and bool(row[2])
    return ended


def record_attempts(
    conn: psycopg.Connection[Any], attempts: Sequence[tuple[Job, str, str | None, float]]
) -> None:
    """Keep (job, outcome, error, seconds) of runs that did not succeed, for the dashboard."""
    conn.execute(
        attempt_sql.ATTEMPTS_INSERT,
        {
            "worker": f"{socket.gethostname()}:{os.getpid()}",
            "ids": [job.id for job, _, _, _ in attempts],
            "attempts": [job.attempt for job, _, _, _ in attempts],
            "outcomes": [outcome for _, outcome, _, _ in attempts],
            "durations": [seconds for _, _, _, seconds in attempts],
            "errors": [None if e is None else truncate_error(e) for _, _, e, _ in attempts],
        },
    )


def _fences(jobs: Sequence[Job]) -> dict[str, str]:
    """The (id, attempt) pairs of runs as two array literals, ids[i] ran as attempts[i].

    A busy worker sends these for every job it finishes, so they go as literals, not lists.
    """
    return {
        "ids": number_array([str(job.id) for job in jobs]),
        "attempts": number_array([str(job.attempt) for job in jobs]),
    }


def reap_expired(conn: psycopg.Connection[Any]) -> list[tuple[int, str, str]]:
    """Return expired leases to pending (or failed when out of attempts); (id, kind, status)."""
    return [(int(r[0]), r[1], r[2]) for r in conn.execute(outcome_sql.JOBS_REAP).fetchall()]


def truncate_error(error: str) -> str:
    """An error as ``last_error`` can hold it: no NUL (PostgreSQL text refuses it), no 10 MB,
    nothing UTF-8 cannot encode."""
    error = error.replace("\x00", "\\x00")
    if len(error) > ERROR_TEXT_LIMIT:
        error = error[:ERROR_TEXT_LIMIT] + f"... [truncated, {len(error)} characters in all]"
    return printable(error)


def printable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (lone surrogates) written as ``\\udcff``.

    A file name read with ``os.fsdecode`` keeps its undecodable bytes as lone surrogates,
    and an exception quoting it would otherwise fail every write and print of its message.
    """
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


def writable_retry_time(when: datetime | timedelta) -> datetime | timedelta:
    """A retry time within the range the database stores and Python reads back.

    ``Retry(after=timedelta(days=2 * 10**8))`` would put ``run_at`` past PostgreSQL's last
    timestamp, and a ``run_at`` past year 9999 could not be claimed by Python: both are
    clamped, to a century from now at most, and to years 1900-9000 when absolute.
    """
    if isinstance(when, timedelta):
        return max(-MAX_RETRY_DELAY, min(MAX_RETRY_DELAY, when))
    return max(EARLIEST_RUN_AT, min(LATEST_RUN_AT, when))
