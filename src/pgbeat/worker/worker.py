"""The worker loop: claim due jobs into free slots, record outcomes, renew the leases of
running jobs, reap expired ones.

One thread claims (in batches, sized to free slots), renews and reaps on its own connection;
handlers run in the executor's slots; an OutcomeFlusher thread records their outcomes in
batches on a second connection; a listener thread wakes the loop when jobs arrive and
stops the runs of cancelled jobs. Nothing holds a transaction or a row lock while a handler
runs.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import psycopg_pool

from pgbeat.background import BackgroundLoop
from pgbeat.db import pooler
from pgbeat.db.connections import Outage, ReconnectBackoff, checked_connection, make_pool
from pgbeat.errors import UnknownKind
from pgbeat.job import Job, JobContext
from pgbeat.observe import tracing
from pgbeat.observe.heartbeat import Heartbeat
from pgbeat.observe.metrics import Metrics
from pgbeat.registry import Registry
from pgbeat.worker import operations
from pgbeat.worker.claiming import Claimer
from pgbeat.worker.executor import Executor, Run
from pgbeat.worker.flusher import OutcomeFlusher
from pgbeat.worker.listener import Listener
from pgbeat.worker.outcomes import OutcomeBuffer
from pgbeat.worker.renewal import LeaseRenewer
from pgbeat.worker.retention import Retention
from pgbeat.worker.sessions import SESSION_SETTINGS, warm_outcome_session, worker_session
from pgbeat.worker.settings import WorkerSettings, resolve_timing
from pgbeat.worker.timers import ClaimTimers
from pgbeat.worker.workflow_repair import WorkflowRepair

__all__ = ["SESSION_SETTINGS", "Worker", "WorkerSettings", "resolve_timing"]

log = logging.getLogger("pgbeat.worker")

BATCH_WINDOW = 0.002  # seconds a freed slot or an outcome may wait to share a round trip
# ... an outcome of a limited (or fair) queue: its slot is free for a claim once it is
# written (a fair queue's new key waits for that slot: docs/flow-control.md)
FREEING_WINDOW = 0.0005
RECENT_CANCELS = 2.0  # seconds a heard cancel is remembered for runs not yet submitted


class Worker:
    """Runs the jobs of ``registry`` from the database at ``url`` until ``stop()``."""

    def __init__(
        self,
        url: str,
        registry: Registry,
        settings: WorkerSettings | None = None,
        *,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings or WorkerSettings()
        self._metrics = metrics or Metrics()
        self.lease, self.timeout = resolve_timing(self.settings.lease, self.settings.timeout)
        self._timeout_s = self.timeout.total_seconds()
        self._url = url
        self._registry = registry
        # One outage of the database is logged once, whichever connection meets it first.
        backoff = ReconnectBackoff(url, log, lambda: self._metrics.reconnected("worker"))
        # Outcomes are written on a second connection (flusher.py says why).
        self._connector = worker_session(
            url, "pgbeat-worker", backoff, operations.use_fast_payloads
        )
        self._handler_pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._loop = BackgroundLoop("pgbeat-worker", self._step)
        self._executor = Executor(self.settings.concurrency, self._on_settled, self._on_slot_freed)
        self._renewer = LeaseRenewer(self._executor, self.lease, self.settings.poll_interval)
        listen_url = pooler.listen_url(url)  # None behind a pooler: LISTEN needs a session
        self._listener = (
            Listener(
                listen_url,
                self._on_notify,
                on_cancel=self._on_cancel,
                on_queues=self._on_queues_changed,
            )
            if self.settings.listen and listen_url
            else None
        )
        self._hurry = threading.Event()
        self._lock = threading.Lock()
        self._recent_cancels: dict[int, float] = {}  # job id -> when a cancel was heard
        self._traced = tracing.ProviderCheck()  # asked at each claim (it says how often)
        self._recorder = OutcomeBuffer(self.settings.backoff, rng or random.Random(), self._metrics)
        self._claim_threshold = max(
            1, min(self.settings.claim_batch, self.settings.concurrency) // 2
        )
        self._writer = OutcomeFlusher(
            worker_session(url, "pgbeat-worker-outcomes", backoff, warm_outcome_session),
            self._recorder,
            batch=self._claim_threshold,
            window=BATCH_WINDOW,
            freeing_window=FREEING_WINDOW,
            on_failure=self._loop.wake,
            on_requeued=self._on_notify,
            on_freed=self._on_freed,
        )
        self._notified = False
        self._freed: dict[str, float] = {}  # limited queues whose jobs' outcomes were written
        self._queues_changed = False
        self._timers = ClaimTimers(
            poll_every=self.settings.poll_interval.total_seconds(),
            reap_every=min(max(self.lease.total_seconds() / 4, 0.25), 30.0),
            window=BATCH_WINDOW,
        )
        # Without --kinds, only the registry's kinds: a job of a kind no live worker has a
        # handler for waits for one (a rolling deploy adding a kind must not fail its jobs).
        self._claimer = Claimer(
            self.lease,
            self.settings.kinds or registry.kinds(),
            self.settings.queues,
            ready_heard=self._listener.ready_heard if self._listener is not None else None,
        )
        self._heartbeat = (
            Heartbeat(url, "worker", details=self.settings.described(registry.kinds()))
            if self.settings.heartbeat
            else None
        )
        self._retention = (
            Retention(url, self.settings.retention, metrics=self._metrics)
            if self.settings.retention.enabled
            else None
        )
        repair = self.settings.workflow_repair
        self._workflow_repair = (
            WorkflowRepair(url, repair.total_seconds()) if repair is not None else None
        )
        self.stopped = threading.Event()

    # -- control ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; let running jobs finish within the grace period; then return."""
        if self._loop.stopping.is_set():
            self._hurry.set()  # a second request: release running jobs now
        self._loop.stop()

    def _on_notify(self) -> None:
        with self._lock:
            self._notified = True
        self._loop.wake()

    def _on_freed(self, queues: Mapping[str, float]) -> None:
        """Jobs of limited queues left running (their outcomes committed): claim again now,
        instead of at the limited queues' recheck."""
        with self._lock:
            self._freed.update(queues)
        self._loop.wake()

    def _on_queues_changed(self) -> None:
        with self._lock:
            self._queues_changed = self._notified = True
        self._loop.wake()

    def _on_cancel(self, job_ids: set[int]) -> None:
        """Cancels heard on the listener: a hint only (any role that can connect may send
        one), so the next renewal round, now, asks the database which runs were really asked
        to stop and stops only those. An empty set: the listener (re)connected, and a cancel
        may have been missed."""
        if job_ids:
            with self._lock:  # before the look at the runs: _start looks here after it submits
                now = time.monotonic()
                self._recent_cancels = {
                    i: t for i, t in self._recent_cancels.items() if now - t < RECENT_CANCELS
                }
                self._recent_cancels.update(dict.fromkeys(job_ids, now))
            if not job_ids & {run.job.id for run in self._executor.unsettled()}:
                return  # not a job this worker runs (or one it has not submitted yet)
        self._renewer.soon()
        self._loop.wake()

    def _on_settled(self, run: Run) -> None:
        """Buffer the outcome; poke the writer when that makes a write due or starts its timer.

        Waking a thread for each of thousands of runs a second would dominate the work.
        """
        waiting, first_freeing = self._recorder.add(run)
        if waiting == 1 or waiting == self._claim_threshold or first_freeing:
            self._writer.poke()

    def _on_slot_freed(self, free: int) -> None:
        """Wake the loop when freed slots change what it would do: start its BATCH_WINDOW
        timer (the first), claim at once (the threshold's worth, or every slot)."""
        if free == 1 or free == self._claim_threshold or free == self.settings.concurrency:
            self._loop.wake()

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> None:
        """Work until ``stop()``; unfinished jobs are returned to pending before it returns."""
        if self._listener is not None:
            self._listener.start()
        self._writer.start()
        if any(not handler.is_async for handler in self._registry):
            self._executor.start_threads()
        if self._retention is not None:
            self._retention.start()
        if self._workflow_repair is not None:
            self._workflow_repair.start()
        log.info(
            "worker started: kinds=%s queues=%s concurrency=%d lease=%gs timeout=%gs",
            ",".join(self.settings.kinds or self._registry.kinds()) or "-",
            ",".join(self.settings.queues or ()) or "all",
            self.settings.concurrency,
            self.lease.total_seconds(),
            self.timeout.total_seconds(),
        )
        try:
            self._loop.run()
            self._drain()
        finally:
            if self._listener is not None:
                self._listener.stop()
            if self._heartbeat is not None:
                self._heartbeat.stop()
            if self._retention is not None:
                self._retention.stop()
            if self._workflow_repair is not None:
                self._workflow_repair.stop()
            self._executor.shutdown()
            self._writer.close()
            self._connector.close()
            if self._handler_pool is not None:
                self._handler_pool.close()
            log.info("worker stopped")
            self.stopped.set()

    def _step(self) -> float:
        """Reap, claim and start what is due; return how long to wait before looking again."""
        if self._writer.failure is not None:
            raise self._writer.failure
        now = time.monotonic()
        next_deadline = self._executor.expire(now)
        with self._lock:
            notified, self._notified = self._notified, False
            changed, self._queues_changed = self._queues_changed, False
            freed = self._freed
            if freed:
                self._freed = {}
        self._timers.note(now, notified or bool(freed))
        if freed:
            self._claimer.slots_freed(freed)
        self._claimer.listening = self._listener is not None and self._listener.connected.is_set()
        if changed:
            self._claimer.settings_changed()
        elif notified:
            self._claimer.jobs_arrived()
        claim = self._timers.claim_size(
            now,
            free=self._executor.free_slots(),
            threshold=self._claim_threshold,
            batch=self.settings.claim_batch,
        )
        beat = self._heartbeat is not None and now >= self._heartbeat.next_beat
        self._renewer.polling = self._listener is None or not self._listener.connected.is_set()
        renew = self._renewer.due(now)
        if claim or beat or renew or self._timers.reap_due(now):
            result = self._connector.run(lambda conn: self._database_work(conn, now, claim))
            if isinstance(result, Outage):
                self._loop.stopping.wait(result.pause)  # only stop() ends a backoff early
                return 0.0
        wake = self._timers.next_wake(next_deadline, self._executor.free_slots() > 0)
        if self._executor.busy():
            wake = min(wake, self._renewer.next_round)
        if self._heartbeat is not None:
            wake = min(wake, self._heartbeat.next_beat)
        return max(0.0, wake - time.monotonic())

    def _database_work(self, conn: psycopg.Connection[Any], now: float, claim: int) -> None:
        """Reap (now and then) and claim, pipelined into one round trip.

        Handlers start only after the claim has committed: a handler that crashes its
        process must find its attempt already charged and its lease set.
        """
        claimed: list[Job] = []
        if self._renewer.due(now):
            self._renewer.renew(conn, now)
        if self._timers.reap_due(now):
            with conn.pipeline():
                self._reap(conn)
                self._timers.reaped(now)
                if claim:
                    claimed = self._claim(conn, claim, now)
        elif claim:
            claimed = self._claim(conn, claim, now)
        # The limited queues whose written outcomes wake the next claim, as this claim's
        # read of them left them: set before its jobs start, so that the flush of their
        # outcomes names them (set at the next step, the first job's was lost, and its
        # queue rested until LIMITED_RECHECK or a notification).
        self._recorder.watched = self._claimer.watched
        traced = bool(claimed) and self._traced(now)  # meta is read only when tracing is on
        self._start(claimed, now, tracing.enqueue_contexts(conn, claimed) if traced else {})
        # After the jobs started (a worker's first step: they waited 2 round trips for it).
        if self._heartbeat is not None:  # on this connection: the process needs none for it
            if now >= self._heartbeat.next_beat:  # the dashboard shows what each runs now
                self._heartbeat.update_details(running=self._executor.busy())
            self._heartbeat.beat_if_due(conn, now)

    def _claim(self, conn: psycopg.Connection[Any], limit: int, now: float) -> list[Job]:
        jobs = self._claimer.claim(conn, limit)
        self._metrics.claimed(len(jobs))
        self._timers.claimed(now, limit, len(jobs))
        if self._claimer.stepped:  # a fair queue's slots go out in steps: the next one now
            self._timers.maybe_more = True
        elif not jobs or self._claimer.limited_short:  # limits may hold due jobs back: look soon
            self._timers.next_job_in(now, self._claimer.seconds_to_next(conn, fast=not jobs))
        return jobs

    def _start(self, jobs: list[Job], claim_sent: float, traces: dict[int, Any]) -> None:
        if not jobs:
            return
        started = time.monotonic()
        deadline = started + self._timeout_s
        runs = []
        for job in jobs:
            try:
                handler = self._registry.get(job.kind)
            except UnknownKind as exc:
                self._on_settled(Run(job, None, None, deadline, started, error=exc, settled=True))
                continue
            context = (
                JobContext.for_job(job, self.timeout, self._handler_connection)
                if handler.needs_context
                else None
            )
            runs.append(Run(job, handler, context, deadline, started, trace=traces.get(job.id)))
        self._renewer.claimed(runs, claim_sent)
        self._executor.submit_many(runs)
        with self._lock:
            missed = {run.job.id for run in runs} & self._recent_cancels.keys()
        if missed:  # a cancel heard between the claim's commit and the submit: ask now
            self._renewer.soon()

    def _handler_connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """Connections for handlers, from their own pool so they never starve the loop."""
        with self._lock:
            if self._handler_pool is None:
                self._handler_pool = make_pool(
                    self._url, max_size=self.settings.concurrency, name="pgbeat-handlers"
                )
                self._handler_pool.open()
        return checked_connection(self._handler_pool, timeout=30.0)

    def _reap(self, conn: psycopg.Connection[Any]) -> None:
        for job_id, kind, status in operations.reap_expired(conn):
            log.warning("job %d (%s): lease expired, now %s", job_id, kind, status)

    # -- shutdown -----------------------------------------------------------------------

    def _drain(self) -> None:
        """Let running jobs finish within the grace period, then release the rest."""
        deadline = time.monotonic() + self.settings.grace.total_seconds()
        running = self._executor.unsettled()
        if running:
            log.info(
                "stopping: waiting up to %gs for %d running jobs",
                self.settings.grace.total_seconds(),
                len(running),
            )
        while self._executor.unsettled() and time.monotonic() < deadline:
            if self._hurry.is_set():
                break
            now = time.monotonic()
            if self._renewer.due(now):  # a grace longer than the lease must not lose the jobs
                self._connector.run(functools.partial(self._renewer.renew, now=now))
            self._executor.expire(now)
            self._loop.pause(min(0.1, max(0.0, deadline - time.monotonic())))
        released = self._executor.release_all()
        if released:
            log.warning("returning %d unfinished jobs to pending", len(released))
        lost = self._writer.close()
        if lost:
            log.error(
                "could not record %d outcomes: the database is unreachable; their leases "
                "will expire and the jobs will run again",
                lost,
            )
