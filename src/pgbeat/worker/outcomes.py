"""Finished runs waiting to be written, and the statements that write them in batches.

Handler threads add runs as they settle; the worker loop writes them all at once. An
outcome is only dropped from the buffer once its statement has been sent without error.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, NamedTuple

import psycopg

from pgbeat.backoff import BackoffPolicy
from pgbeat.db.connections import is_connection_failure
from pgbeat.db.kept_cursor import KeptCursor
from pgbeat.errors import ResultError
from pgbeat.job import Job
from pgbeat.observe.metrics import Metrics
from pgbeat.worker import operations
from pgbeat.worker.executor import Run
from pgbeat.worker.outcome_log import OutcomeTally, first_line, job_log, log_outcome
from pgbeat.worker.results import encode_result
from pgbeat.worker.verdict import Outcome, decide

log = logging.getLogger("pgbeat.worker")
_DONE = Outcome("done")
# A deadlock or serialization failure is the database choosing a victim among statements
# locking the same rows (a cancel of many jobs, a workflow's advance, an operator's
# UPDATE): nothing is wrong with the outcomes, so the batch is sent again, its groups
# already written skipped, up to this many times before anything else is tried.
TRANSIENT_TRIES = 5
_TRANSIENT = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
_UNASKED = "stopped for a cancel notification the database holds no request for: released"


class Written(NamedTuple):
    """What a flush wrote: whether a job went back to pending (a retry or a release), and
    which of the watched queues had jobs leave running (the slots they free), each with the
    longest run of those jobs (a fair queue's pace, worker/fair_steps.py)."""

    requeued: bool
    freed: Mapping[str, float]


NOTHING_WRITTEN = Written(False, MappingProxyType({}))


class OutcomeBuffer:
    """A thread-safe buffer of settled runs, flushed by the worker loop.

    ``watched`` is the queues whose slots the claiming loop waits for (its limited ones,
    set by that thread): a flush names those its written jobs were of, and the writer
    writes their outcomes sooner (``freeing_since``: a slot of such a queue is free for a
    claim only once its job's outcome is committed).
    """

    def __init__(self, backoff: BackoffPolicy, rng: random.Random, metrics: Metrics) -> None:
        self._backoff = backoff
        self._rng = rng
        self._metrics = metrics
        # Metrics off (the base class): nothing to tell per run, and a flush of plain
        # completions skips its loop over the runs (0.3 us a job of a drain's 2 us here).
        self._metered = type(metrics).job_finished is not Metrics.job_finished
        self._lock = threading.Lock()
        self._runs: list[Run] = []
        self._since: float | None = None  # when the oldest unwritten run settled
        self._freeing_since: float | None = None  # ... the oldest of a watched queue
        self._tally = OutcomeTally()
        self.watched: frozenset[str] = frozenset()
        self._kept = KeptCursor()  # the completions' own cursor (db/kept_cursor.py)

    def add(self, run: Run) -> tuple[int, bool]:
        """Buffer ``run``; return how many runs now wait, and whether it is the first of
        them to free a watched queue's slot (the writer's deadline just came closer)."""
        with self._lock:
            now = None
            if not self._runs:
                self._since = now = time.monotonic()
            self._runs.append(run)
            first_freeing = self._freeing_since is None and run.job.queue in self.watched
            if first_freeing:
                self._freeing_since = now or time.monotonic()
            return len(self._runs), first_freeing

    def waiting(self) -> tuple[int, float | None]:
        """How many runs wait to be written, and since when (monotonic seconds)."""
        with self._lock:
            return len(self._runs), self._since

    def freeing_since(self) -> float | None:
        """Since when the oldest waiting run of a watched queue waits (None: there is none)."""
        with self._lock:
            return self._freeing_since

    def flush(self, conn: psycopg.Connection[Any]) -> Written:
        """Write every waiting run; on failure they wait for the next flush.

        Says whether a job went back to pending (a retry or a release) or a workflow step
        ended (the statement that ended it released the steps that waited only for it), so
        the worker can look again for work it would otherwise only find at a notification
        or its next poll; and which watched queues the written jobs were of: their slots
        are free now.
        """
        with self._lock:
            runs, self._runs, self._since = self._runs, [], None
            freeing, self._freeing_since = self._freeing_since, None
        if not runs:
            return NOTHING_WRITTEN
        watched = self.watched  # one read: the claiming thread replaces it whole
        try:
            batch = self._decide(runs)
            decided = self._write(conn, batch)
        except BaseException as exc:
            with self._lock:  # an outcome is never dropped
                self._runs[:0] = runs
                self._since = self._since or time.monotonic()
                if freeing is not None:
                    self._freeing_since = self._freeing_since or time.monotonic()
            if isinstance(exc, _TRANSIENT):  # TRANSIENT_TRIES victims in a row: later
                log.warning("could not record %d outcomes yet: %s", len(runs), first_line(exc))
                return NOTHING_WRITTEN
            raise
        # Every outcome decided done and written as decided (the batch's own list back: no
        # cancel found by the writes, no one-by-one fallback): nothing to log, count by
        # verdict or claim again for.
        plain = batch.plain and decided is batch.decided
        log_done = job_log.isEnabledFor(logging.INFO)
        if not plain or log_done or self._metered:
            for run, outcome in decided:
                if outcome is not _DONE or log_done:
                    log_outcome(run, outcome)
                self._metrics.job_finished(run.job.kind, outcome.verdict, run.duration)
        self._tally.count(decided, plain)
        requeued = batch.steps_ended or (
            not plain and any(o.verdict in ("retry", "released", "snoozed") for _, o in decided)
        )
        if not watched:  # a worker without limited queues: nothing to name
            return Written(requeued, NOTHING_WRITTEN.freed)
        freed: dict[str, float] = {}
        for run in runs:
            if run.job.queue in watched:
                freed[run.job.queue] = max(freed.get(run.job.queue, 0.0), run.duration)
        return Written(requeued, freed)

    def _decide(self, runs: Sequence[Run]) -> _Batch:
        batch = _Batch()
        for run in _latest_attempts(runs):
            error = run.error
            if error is None:  # the common case, without a new Outcome for each
                try:
                    result = encode_result(run.result)
                except ResultError as exc:
                    error = exc
                else:
                    batch.decided.append((run, _DONE))
                    batch.done.append(run.job)
                    batch.results.append(result)
                    continue
            batch.add(run, decide(run.job, error, self._backoff, self._rng))
        return batch

    def _write(self, conn: psycopg.Connection[Any], batch: _Batch) -> list[tuple[Run, Outcome]]:
        """Write a batch; if the database refuses it (not a lost connection), one by one."""
        try:
            return _send_again_if_transient(conn, batch, self._kept)
        except Exception as exc:
            if _no_jobs_fault(exc, conn):
                raise  # kept for the next flush; nothing is wrong with a job
            log.warning(
                "could not record %d outcomes at once (%s); recording them one by one",
                len(batch.decided),
                first_line(exc),
            )
            return [self._write_one(conn, run, outcome) for run, outcome in batch.decided]

    def _write_one(
        self, conn: psycopg.Connection[Any], run: Run, outcome: Outcome
    ) -> tuple[Run, Outcome]:
        """Write one outcome; if the database refuses it, fail its job with the reason.

        When even that is refused the fault is not this job's: the error propagates and
        stops the worker, as any bug does, with every outcome kept.
        """
        try:
            return _send_again_if_transient(conn, _Batch.of(run, outcome))[0]
        except Exception as exc:
            if _no_jobs_fault(exc, conn):
                raise
            refused = exc
        failed = Outcome(
            "failed",
            f"pgbeat could not record this run's outcome ({outcome.verdict}): "
            f"{type(refused).__name__}: {first_line(refused)}",
        )
        try:
            return _Batch.of(run, failed).send(conn)[0]
        except Exception as exc:
            raise exc from refused


def _no_jobs_fault(exc: Exception, conn: psycopg.Connection[Any]) -> bool:
    """A lost connection, or a deadlock's victim again and again: the outcomes wait for
    the next flush, none is failed for it."""
    return is_connection_failure(exc, conn) or isinstance(exc, _TRANSIENT)


def _send_again_if_transient(
    conn: psycopg.Connection[Any], batch: _Batch, kept: KeptCursor | None = None
) -> list[tuple[Run, Outcome]]:
    """Send the batch, again (from the group that failed) after a deadlock or a
    serialization failure, up to TRANSIENT_TRIES times."""
    for tries in range(1, TRANSIENT_TRIES + 1):
        try:
            return batch.send(conn, kept)
        except _TRANSIENT as exc:
            if tries == TRANSIENT_TRIES:
                raise
            log.info("outcomes met %s; sending them again", type(exc).__name__)
    raise AssertionError("unreachable")


class _Batch:
    """Decided runs, grouped by the statement that writes them."""

    def __init__(self) -> None:
        self.decided: list[tuple[Run, Outcome]] = []
        self.done: list[Job] = []
        self.results: list[str | None] = []  # JSON text of each done run's return value
        self.released: list[Job] = []
        self.retries: list[tuple[Job, str, Any]] = []
        self.snoozes: list[tuple[Job, Any]] = []
        self.failures: list[tuple[Job, str]] = []
        self.stops: list[tuple[Job, str]] = []  # runs stopped for a cancel
        self.steps_ended = False  # a workflow step ended: dependants may have been released
        self.cancelled: set[int] = set()  # ids the written groups ended cancelled
        self.stopped: set[int] = set()  # ids of the written stops
        self.recorded = False  # the attempts history written
        self.plain = True  # every outcome decided _DONE (add() takes any other, and clears it)

    @classmethod
    def of(cls, run: Run, outcome: Outcome) -> _Batch:
        batch = cls()
        if outcome.verdict == "done":  # written one by one: its result is encoded again
            try:
                batch.results.append(encode_result(run.result))
            except ResultError as exc:
                outcome = Outcome("failed", f"ResultError: {exc}")
                batch.decided.append((run, outcome))
                batch.failures.append((run.job, outcome.error or ""))
                return batch
        batch.add(run, outcome)
        return batch

    def add(self, run: Run, outcome: Outcome) -> None:
        self.plain = False
        self.decided.append((run, outcome))
        if outcome.verdict == "done":
            self.done.append(run.job)
        elif outcome.verdict == "released":
            self.released.append(run.job)
        elif outcome.verdict == "retry":
            self.retries.append((run.job, outcome.error or "", outcome.retry_at))
        elif outcome.verdict == "snoozed":
            self.snoozes.append((run.job, outcome.retry_at))
        elif outcome.verdict == "cancelled":
            self.stops.append((run.job, outcome.error or ""))
        else:  # failed: the fail statement ends a job asked to stop cancelled
            self.failures.append((run.job, outcome.error or ""))

    def send(
        self, conn: psycopg.Connection[Any], kept: KeptCursor | None = None
    ) -> list[tuple[Run, Outcome]]:
        """Write the batch; return each run with the outcome it really had.

        A run whose job ended cancelled (superseded, or asked to stop) is recorded as
        cancelled in the attempts history, whatever its handler did. Sent again after a
        failure part-way, it writes only the groups not yet written.
        """
        # No transaction: each statement is fenced by (id, attempt), so a group written
        # twice would be harmless, but what it answered the first time would be lost.
        if self.done:
            if len(self.results) != len(self.done):  # a done outcome added without its result
                self.results = [None] * len(self.done)
            on = conn if kept is None else kept.on(conn)  # a flush's cursor, kept
            completed = operations.complete_jobs(on, self.done, self.results)
            self.steps_ended = self.steps_ended or completed.steps
            self.cancelled |= completed
            self.done, self.results = [], []
        if self.retries:
            self.cancelled |= operations.retry_jobs(conn, self.retries)
            self.retries = []
        if self.snoozes:
            self.cancelled |= operations.snooze_jobs(conn, self.snoozes)
            self.snoozes = []
        if self.failures:
            failed = operations.fail_jobs(conn, self.failures)
            self.steps_ended = self.steps_ended or failed.steps
            self.cancelled |= failed
            self.failures = []
        if self.released:
            self.cancelled |= operations.release_jobs(conn, self.released)
            self.released = []
        if self.stops:
            self.cancelled |= operations.stop_jobs(conn, self.stops)
            self.stopped |= {job.id for job, _ in self.stops}
            self.stops = []
        decided = self.decided
        if self.cancelled or self.stopped:
            decided = [
                (run, _really(run, outcome, self.cancelled, self.stopped))
                for run, outcome in decided
            ]
        unsuccessful = [
            (run.job, outcome.verdict, outcome.error, run.duration)
            for run, outcome in decided
            if outcome is not _DONE and outcome.verdict != "done"
        ]
        if unsuccessful and not self.recorded:  # the attempts history: none when healthy
            operations.record_attempts(conn, unsuccessful)
            self.recorded = True
        return decided


def _really(run: Run, outcome: Outcome, cancelled: set[int], stopped: set[int]) -> Outcome:
    """The outcome a run really had: cancelled when its job ended so; released when it was
    stopped for a cancel the database holds no request for (a forged notification)."""
    if run.job.id in cancelled:
        return Outcome("cancelled", outcome.error or "cancelled while running")
    if run.job.id in stopped:
        return Outcome("released", _UNASKED)
    return outcome


def _latest_attempts(runs: Sequence[Run]) -> list[Run]:
    """One run per job: a late, timed-out run of an earlier attempt is already fenced out."""
    if len({run.job.id for run in runs}) == len(runs):
        return list(runs)  # the usual flush: one run per job
    latest: dict[int, Run] = {}
    for run in runs:
        kept = latest.get(run.job.id)
        if kept is None or run.job.attempt > kept.job.attempt:
            latest[run.job.id] = run
    return list(latest.values())
