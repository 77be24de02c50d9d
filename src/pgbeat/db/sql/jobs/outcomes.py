"""The statements that end or extend a worker's runs: the batched outcomes (complete,
retry, snooze, fail, release), lease renewal, the reaper, and the notifications that tell
workers of cancels and waiters of ends (with what ``pgbeat.wait`` reads of a job).

Every one is fenced by ``(id, attempt)`` or by the lease, so a run that lost its job can
no longer change it; each comment says which index it relies on.
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.ended_steps import _ADVANCE_ENDED, _ADVANCED

# Outcome statements take parallel arrays (ids[i] ran as attempts[i]) and look rows up by
# primary key with `id = ANY(...)`; array_position picks each row's own values. The attempt
# fences out a run whose lease expired and whose job was claimed again since. A pending
# row takes a late outcome only when the reaper made it pending (started_at kept): a
# snooze or a release gives the attempt back and clears started_at, so a stale run whose
# attempt number the row holds again cannot write to it. A run whose
# job was superseded (pgbeat/jobs/keys.py: a newer job took its key) or asked to stop
# (cancel_requested_at) is never made pending again: where it would retry, snooze or be
# released, it ends cancelled; a cancelled run ends cancelled whatever it returned. Each
# returns the ids that ended cancelled, and sends one NOTIFY on pgbeat_finished whose
# payload is the ids that reached a final state, comma-separated ('' when more than 800
# would overflow the payload: a waiter then looks at its job), so pgbeat.wait wakes at once.

# The head of the outcomes that put a run back to pending (retry, snooze, stop, release)
# unless someone asked it to stop (superseded, or cancel_requested_at): then it ends
# cancelled, now. Each statement goes on with its own SET items.
_RELEASED_UNLESS_ASKED: LiteralString = """
WITH ended AS (
    UPDATE jobs
    SET status = CASE WHEN superseded_at IS NULL AND cancel_requested_at IS NULL
                      THEN 'pending' ELSE 'cancelled' END,
        finished_at = CASE WHEN superseded_at IS NULL AND cancel_requested_at IS NULL
                           THEN finished_at ELSE now() END,"""

# A run given back unless asked to stop: its attempt returned (snooze, stop).
_ATTEMPT_GIVEN_BACK: LiteralString = """
        attempts = CASE WHEN superseded_at IS NULL AND cancel_requested_at IS NULL
                        THEN greatest(attempts - 1, 0) ELSE attempts END,"""

# A run given back unless asked to stop: started_at cleared, so the fence below does not
# take the pending row for a reaped one (snooze, stop, release; no trailing comma).
_STARTED_CLEARED: LiteralString = """
        started_at = CASE WHEN superseded_at IS NULL AND cancel_requested_at IS NULL
                          THEN NULL ELSE started_at END"""

# When a run put back to pending runs again: its absolute run_at, or its delay from the
# database clock (retry, snooze).
_RUN_AT_ASKED: LiteralString = """
        run_at = CASE WHEN superseded_at IS NOT NULL OR cancel_requested_at IS NOT NULL
                      THEN run_at ELSE
                 coalesce((%(run_ats)s::timestamptz[])[array_position(%(ids)s::bigint[], id)],
                          now() + (%(delays)s::interval[])[array_position(%(ids)s::bigint[], id)])
                 END"""

# The fence of every outcome: the row by primary key, still at the run's own attempt.
_FENCE: LiteralString = """
    WHERE id = ANY(%(ids)s::bigint[])
      AND attempts = (%(attempts)s::int[])[array_position(%(ids)s::bigint[], id)]"""

# The fenced rows of the outcomes a run reports when it ends by itself: its row running,
# or pending after the reaper (started_at kept); with its workflow, for _ALL_ENDED.
_RUNNING_OR_REAPED: LiteralString = (
    _FENCE
    + """
      AND (status = 'running' OR (status = 'pending' AND started_at IS NOT NULL))
    RETURNING id, status, workflow_id
)"""
)

# The fenced rows of the outcomes of a run its worker stopped: the row still running; with
# its workflow, for _CANCELLED_ENDED.
_STILL_RUNNING: LiteralString = (
    _FENCE
    + """
      AND status = 'running'
    RETURNING id, status, workflow_id
)"""
)

# The tail of the outcomes that end every run they touch (complete, fail): the ids that
# ended cancelled, one NOTIFY on the schema's pgbeat_finished listing every id (up to
# 800; beyond, an empty payload tells waiters to look for themselves), and the advance of
# the workflow steps that ended, true when there were some (it may have released
# dependants: the worker claims again).
_ALL_ENDED: LiteralString = (
    """
SELECT coalesce(array_agg(id) FILTER (WHERE status = 'cancelled'), '{}'),
       CASE WHEN count(*) > 0 THEN pg_notify(pgbeat_channel('pgbeat_finished'),
           CASE WHEN count(*) <= 800 THEN string_agg(id::text, ',') ELSE '' END) END,"""
    + _ADVANCE_ENDED
    + """
FROM ended"""
)

# The tail of the outcomes that may end runs cancelled (a run asked to stop): the ids that
# ended cancelled, one NOTIFY on the schema's pgbeat_finished whose payload lists them
# (up to 800; beyond, an empty payload tells waiters to look for themselves), and the
# advance of the workflow steps that ended cancelled.
_CANCELLED_ENDED: LiteralString = (
    """
SELECT coalesce(array_agg(id) FILTER (WHERE status = 'cancelled'), '{}'),
       CASE WHEN bool_or(status = 'cancelled') THEN pg_notify(pgbeat_channel('pgbeat_finished'),
           CASE WHEN count(*) <= 800
                THEN string_agg(id::text, ',') FILTER (WHERE status = 'cancelled')
                ELSE '' END) END,"""
    + _ADVANCE_ENDED
    + """
FROM ended"""
)

# A stopped or released run keeps its error unless asked to stop (stop, release; each
# goes on with its own ELSE).
_ERROR_KEPT_UNLESS_ASKED: LiteralString = """
        last_error = CASE WHEN superseded_at IS NULL AND cancel_requested_at IS NULL
                          THEN last_error"""

# The fence and tail of the outcomes of a run its worker stopped (stop, release).
_STOPPED_ENDED: LiteralString = _STILL_RUNNING + _CANCELLED_ENDED

# Marks finished runs done, with their return values (primary key). %(results)s is one
# JSON object from job id (as text) to its result, NULL when no run returned anything: a
# lookup in it is a binary search, where a subscript of a jsonb[] walks the array.
JOBS_COMPLETE: LiteralString = (
    """
WITH ended AS (
    UPDATE jobs
    SET status = CASE WHEN cancel_requested_at IS NULL THEN 'done' ELSE 'cancelled' END,
        locked_until = NULL, finished_at = now(),
        result = %(results)s::jsonb -> id::text"""
    + _RUNNING_OR_REAPED
    + _ALL_ENDED
)

# Puts failed runs back to pending at their retry time: an absolute run_at, or a delay
# from the database clock (primary key); superseded or cancelled ones end cancelled, their
# error after the reason.
JOBS_RETRY: LiteralString = (
    _RELEASED_UNLESS_ASKED
    + """
        locked_until = NULL,
        last_error = CASE WHEN superseded_at IS NULL AND cancel_requested_at IS NULL THEN ''
                          ELSE coalesce(last_error || '; ', '') END
                     || (%(errors)s::text[])[array_position(%(ids)s::bigint[], id)],"""
    + _RUN_AT_ASKED
    + _RUNNING_OR_REAPED
    + _CANCELLED_ENDED
)

# Puts snoozed runs back to pending at their time without spending an attempt: the run's
# attempt is given back (attempts - 1), snoozes counts it, max_attempts never changes
# (primary key). started_at is cleared: a pending row whose attempts a stale run's fence
# could match again is then not taken for a reaped one (see the fence below). Superseded
# or cancelled ones end cancelled, their attempt kept.
JOBS_SNOOZE: LiteralString = (
    _RELEASED_UNLESS_ASKED
    + """
        locked_until = NULL,"""
    + _ATTEMPT_GIVEN_BACK
    + """
        snoozes = snoozes + 1,"""
    + _STARTED_CLEARED
    + ","
    + _RUN_AT_ASKED
    + _RUNNING_OR_REAPED
    + _CANCELLED_ENDED
)

# Parks runs in the failed dead letter with their error (primary key); a run asked to stop
# ends cancelled instead, its error after the reason.
JOBS_FAIL: LiteralString = (
    """
WITH ended AS (
    UPDATE jobs
    SET status = CASE WHEN cancel_requested_at IS NULL THEN 'failed' ELSE 'cancelled' END,
        locked_until = NULL, finished_at = now(),
        last_error = CASE WHEN cancel_requested_at IS NULL THEN ''
                          ELSE coalesce(last_error || '; ', '') END
                     || (%(errors)s::text[])[array_position(%(ids)s::bigint[], id)]"""
    + _RUNNING_OR_REAPED
    + _ALL_ENDED
)

# Ends runs their worker stopped for a cancel (primary key): cancelled when the database
# holds the request (cancel_requested_at, or superseded), with the error after the reason;
# else, the cancel being only a notification anyone may send, released like JOBS_RELEASE.
JOBS_STOP: LiteralString = (
    _RELEASED_UNLESS_ASKED
    + _ERROR_KEPT_UNLESS_ASKED
    + """
                          ELSE coalesce(last_error || '; ', '')
                               || (%(errors)s::text[])[array_position(%(ids)s::bigint[], id)]
                          END,"""
    + _ATTEMPT_GIVEN_BACK
    + _STARTED_CLEARED
    + """,
        locked_until = NULL"""
    + _STOPPED_ENDED
)

# Returns running jobs to pending at shutdown without charging the attempt (primary key);
# a superseded or cancelled one is not run again: it ends cancelled.
# Never kept (prepare=False): a plan kept from a small table reads all of jobs_running,
# whose predicate its status test matches, not the primary key (worker.SESSION_SETTINGS).
JOBS_RELEASE: LiteralString = (
    _RELEASED_UNLESS_ASKED
    + _ERROR_KEPT_UNLESS_ASKED
    + """
                          ELSE concat_ws('; ', last_error, 'released at shutdown') END,
        locked_until = NULL, attempts = greatest(attempts - 1, 0),"""
    + _STARTED_CLEARED
    + _STOPPED_ENDED
)

# Extends the leases of the runs a worker still has, one statement per renewal round
# (primary key), fenced by attempt like the outcomes: a run whose job was reaped and
# claimed again gets no row back, and its worker gives it up. Says which jobs someone
# asked to stop (cancel_requested_at): behind a pooler that is how their worker learns it.
# Never waits for a row lock (SKIP LOCKED): the outcome writer ends some of the same rows
# at the same moment, each statement locking them in the order its plan reads them, and
# a renewal that waited could close a deadlock with it (seen in CI run 62). A row locked
# by someone else is not renewed this round but still answered, as the statement's
# snapshot shows it (renewed false): its run keeps its job and the next round renews it.
# Never kept (prepare=False): a plan kept from a small table reads all of jobs_running,
# whose predicate its status test matches, not the primary key (worker.SESSION_SETTINGS).
JOBS_RENEW: LiteralString = """
WITH fenced AS MATERIALIZED (
    SELECT id FROM jobs
    WHERE id = ANY(%(ids)s::bigint[])
      AND attempts = (%(attempts)s::int[])[array_position(%(ids)s::bigint[], id)]
      AND status = 'running'
    FOR UPDATE SKIP LOCKED
), renewed AS (
    UPDATE jobs SET locked_until = now() + %(lease)s::interval
    FROM fenced WHERE jobs.id = fenced.id
    RETURNING jobs.id, jobs.cancel_requested_at IS NOT NULL AS stop
)
SELECT id, stop, true FROM renewed
UNION ALL
SELECT id, cancel_requested_at IS NOT NULL, false FROM jobs
WHERE id = ANY(%(ids)s::bigint[])
  AND attempts = (%(attempts)s::int[])[array_position(%(ids)s::bigint[], id)]
  AND status = 'running'
  AND id NOT IN (SELECT id FROM fenced)"""

# Subscribes to the cancels of running jobs: JOBS_CANCEL, JOBS_CANCEL_KEYED and a
# schedule's overlap = "cancel_other" send NOTIFY pgbeat_cancel with the job's id as the
# payload, after setting its cancel_requested_at.
JOBS_LISTEN_CANCEL: LiteralString = "SELECT pgbeat_listen('pgbeat_cancel')"

# Runs the workflow advance on a step that does not exist (id 0: identities start at 1),
# on a new outcome connection: PostgreSQL compiles a PL/pgSQL function and plans its
# statements at its first call in each session, and that first call would otherwise be
# the end of the first workflow step the connection writes, on that workflow's critical
# path (the end of a 10,000-child fan-out's root: 8.4-10.3 ms on a new connection,
# 4.6-5.4 ms after this, which costs 5-6 ms once).
JOBS_WARM_ADVANCE: LiteralString = """
SELECT pgbeat_workflow_advance(ARRAY[0]::bigint[])"""

# Subscribes to the ends of jobs (the outcome statements' NOTIFY pgbeat_finished), for
# pgbeat.wait.
JOBS_LISTEN_FINISHED: LiteralString = "SELECT pgbeat_listen('pgbeat_finished')"

# Stops listening for the ends of jobs once pgbeat.wait returns, on the caller's connection.
JOBS_UNLISTEN_FINISHED: LiteralString = "SELECT pgbeat_unlisten('pgbeat_finished')"

# What pgbeat.wait reports about one job (primary key).
JOBS_STATE: LiteralString = """
SELECT status, result, last_error FROM jobs WHERE id = %(id)s"""

# Returns jobs whose lease expired (their worker died) to pending, or to failed once their
# attempts are spent, so a job that keeps killing its worker ends (jobs_running). A
# superseded or cancelled job is not run again: it ends cancelled. Jobs back to pending are
# announced on pgbeat_jobs, as JOBS_RETRY's are: every worker resting a limited queue that
# ran dry (the dead worker held its jobs) looks at it again. The steps that ended (failed
# or cancelled) advance their workflows (ended_steps.py).
JOBS_REAP: LiteralString = (
    """
WITH ended AS (
    UPDATE jobs
    SET status = CASE WHEN superseded_at IS NOT NULL OR cancel_requested_at IS NOT NULL
                      THEN 'cancelled'
                      WHEN attempts >= max_attempts THEN 'failed' ELSE 'pending' END,
        run_at = CASE WHEN superseded_at IS NULL AND cancel_requested_at IS NULL
                           AND attempts < max_attempts THEN now()
                      ELSE run_at END,
        finished_at = CASE WHEN superseded_at IS NOT NULL OR cancel_requested_at IS NOT NULL
                                OR attempts >= max_attempts THEN now() END,
        locked_until = NULL,
        last_error = CASE WHEN superseded_at IS NULL AND cancel_requested_at IS NULL THEN ''
                          ELSE coalesce(last_error || '; ', '') END
                     || 'lease expired during attempt ' || attempts
                     || ' (worker died or lost the database)'
    WHERE status = 'running' AND locked_until < now()
    RETURNING id, kind, status, workflow_id,
              CASE WHEN status = 'pending' THEN pg_notify(pgbeat_channel('pgbeat_jobs'), '') END
              AS notified
)"""
    + _ADVANCED
    + """
SELECT id, kind, status, notified FROM ended, advanced"""
)
