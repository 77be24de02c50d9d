"""Runs handlers with bounded concurrency: sync ones on daemon threads, async ones on one loop.

Each run settles exactly once, with the handler's result or with a timeout, a cancel or a
lost lease, whichever comes first. A synchronous handler cannot be interrupted: after that
its thread keeps its slot until the function returns, and what it returns then is discarded.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pgbeat.errors import CancelRequested, Released, TimedOut
from pgbeat.job import Job, JobContext
from pgbeat.observe import tracing
from pgbeat.registry import Handler

log = logging.getLogger("pgbeat.worker")
_LEASE_LAPSED = (
    "gave up on the run: its lease could not be renewed in time (lost the database?), so "
    "the job may be running elsewhere"
)


@dataclass(eq=False)
class Run:
    """One execution of one job: started, then settled once with an error or ``None``."""

    job: Job
    handler: Handler | None
    context: JobContext | None  # only for handlers that take one: its Event costs time
    deadline: float  # time.monotonic()
    started: float = field(default_factory=time.monotonic)
    error: BaseException | None = None
    result: Any = None  # what the handler returned, once settled without an error
    settled: bool = False
    finished_at: float = 0.0
    # Until when (monotonic) the run may go on without a renewal of its lease: past it, the
    # job may have been reaped and claimed by another worker, so the run is given up.
    lease_expires: float = float("inf")
    _task: asyncio.Task[Any] | None = None  # an async handler's, once started
    # Run in a span with this parent (jobs.meta: the enqueue's context, or {} for none);
    # None when tracing is not configured.
    trace: Any = None

    @property
    def duration(self) -> float:
        return (self.finished_at or time.monotonic()) - self.started


class Executor:
    """Runs ``Run``s on at most ``concurrency`` slots and reports each settled one.

    ``on_settled`` is called once per run, on the thread that settled it; ``on_slot_freed``
    with the number of free slots each time a handler returns (after ``on_settled``).
    """

    def __init__(
        self,
        concurrency: int,
        on_settled: Callable[[Run], None],
        on_slot_freed: Callable[[int], None] | None = None,
    ) -> None:
        self.concurrency = concurrency
        self._on_settled = on_settled
        self._on_slot_freed = on_slot_freed
        self._lock = threading.Lock()
        self._busy = 0  # slots held, including timed-out sync handlers still running
        self._running: set[Run] = set()  # started and not yet settled
        # No run settles on its deadline before this time: expire() skips its scan until then.
        self._earliest_deadline = float("inf")
        self._inbox: queue.SimpleQueue[Run | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None

    # -- slots --------------------------------------------------------------------------

    def free_slots(self) -> int:
        with self._lock:
            return self.concurrency - self._busy

    def busy(self) -> int:
        with self._lock:
            return self._busy

    def unsettled(self) -> list[Run]:
        with self._lock:
            return list(self._running)

    # -- starting runs --------------------------------------------------------------------

    def submit_many(self, runs: Sequence[Run]) -> None:
        """Start ``runs`` (the caller checked that enough slots are free)."""
        if not runs:
            return
        with self._lock:
            self._busy += len(runs)
            self._running.update(runs)
            self._earliest_deadline = min(
                self._earliest_deadline, *(min(r.deadline, r.lease_expires) for r in runs)
            )
        async_runs = []
        for run in runs:
            if run.handler is not None and run.handler.is_async:
                async_runs.append(run)
            else:
                self._inbox.put(run)
        if len(async_runs) < len(runs) and len(self._threads) < self.concurrency:
            # After the runs are queued: the first thread made takes one at once, rather
            # than every run waiting for all the threads (10-11 ms for 100, the first job
            # of a worker, measured: a workflow's root waited that long).
            self.start_threads()
        if async_runs:
            # One wake-up of the loop per batch: run_coroutine_threadsafe for each run would
            # cost a cross-thread future and a wake-up apiece.
            self._ensure_loop().call_soon_threadsafe(self._start_tasks, async_runs)

    def start_threads(self) -> None:
        """Make the handler threads that are missing: a worker with handlers that are not
        async makes them as it starts (made at the first claim, they kept its jobs waiting
        10-11 ms for 100 of them, and the loop from its next claim)."""
        while len(self._threads) < self.concurrency:
            thread = threading.Thread(
                target=self._thread_main, name=f"pgbeat-handler-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _thread_main(self) -> None:
        while (run := self._inbox.get()) is not None:
            error: BaseException | None = None
            result: Any = None
            try:
                if run.handler is None:
                    raise RuntimeError("no handler")  # unknown kinds are settled before submit
                if run.trace is None:  # not traced: the common case, no call more
                    result = run.handler.call(run.job.payload, run.context)
                else:
                    result = call_handler(run)
            except BaseException as exc:  # the handler's failure is the job's outcome
                error = exc
            self._finish(run, error, result)

    def _start_tasks(self, runs: list[Run]) -> None:
        """On the loop's thread: one task per run, settled by its done callback."""
        assert self._loop is not None
        for run in runs:
            if run.settled:  # timed out or released before it could start
                self._finish(run, Released("not started"))
                continue
            task = self._loop.create_task(_invoke(run))
            run._task = task
            task.add_done_callback(functools.partial(self._task_done, run))
            if run.settled:  # settled while the task was being made: _abandon missed it
                task.cancel()

    def _task_done(self, run: Run, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self._finish(run, Released("cancelled"))
        elif (error := task.exception()) is not None:
            self._finish(run, error)
        else:
            self._finish(run, None, task.result())

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._loop_thread = threading.Thread(
                target=_run_loop, args=(self._loop,), name="pgbeat-async-handlers", daemon=True
            )
            self._loop_thread.start()
        return self._loop

    # -- ending runs ----------------------------------------------------------------------

    def _finish(self, run: Run, error: BaseException | None, result: Any = None) -> None:
        """A handler returned: free its slot and settle its run, unless that happened."""
        with self._lock:
            self._busy -= 1
            free = self.concurrency - self._busy
            settled_now = self._mark_settled(run, error, result)
        if settled_now:
            self._on_settled(run)
        if self._on_slot_freed is not None:
            self._on_slot_freed(free)
        if not settled_now and not isinstance(error, Released | CancelRequested):
            if isinstance(run.error, CancelRequested):
                return  # a cancelled handler that returned: what it returned is not wanted
            log.warning(
                "job %s (%s) returned after it had timed out or been released; result discarded",
                run.job.id,
                run.job.kind,
            )

    def _mark_settled(self, run: Run, error: BaseException | None, result: Any = None) -> bool:
        """Record the run's end (the lock is held); False if it had already ended."""
        if run.settled:
            return False
        run.settled = True
        run.error = error
        run.result = result
        run.finished_at = time.monotonic()
        self._running.discard(run)
        return True

    def _settle(self, run: Run, error: BaseException | None) -> bool:
        with self._lock:
            settled_now = self._mark_settled(run, error)
        if settled_now:
            self._on_settled(run)
        return settled_now

    def expire(self, now: float) -> float | None:
        """Settle runs past their deadline as timed out; return the next deadline, if any."""
        with self._lock:
            if not self._running:
                self._earliest_deadline = float("inf")
                return None
            if now < self._earliest_deadline:
                return self._earliest_deadline  # maybe a settled run's: one early scan, no more
            running = list(self._running)
        next_deadline: float | None = None
        for run in running:
            if run.deadline <= now:
                timeout = timedelta(seconds=round(run.deadline - run.started, 3))
                self.interrupt(run, TimedOut(f"timed out after {timeout.total_seconds():g}s"))
            elif run.lease_expires <= now:
                self.interrupt(run, TimedOut(_LEASE_LAPSED))
            elif next_deadline is None or min(run.deadline, run.lease_expires) < next_deadline:
                next_deadline = min(run.deadline, run.lease_expires)
        with self._lock:  # only the caller's thread submits: no run started during the scan
            self._earliest_deadline = float("inf") if next_deadline is None else next_deadline
        return next_deadline

    def interrupt(self, run: Run, error: BaseException) -> bool:
        """Settle ``run`` with ``error`` now and tell its handler to stop; False if it had
        settled already. Its slot stays held until the handler returns."""
        if not self._settle(run, error):
            return False
        self._abandon(run)
        return True

    def cancel(self, job_ids: set[int]) -> int:
        """Stop the running runs of these jobs (someone cancelled them); return how many."""
        return sum(
            self.interrupt(run, CancelRequested("cancelled while running"))
            for run in self.unsettled()
            if run.job.id in job_ids
        )

    def lease_renewed(self, runs: Sequence[Run], until: float) -> None:
        """These runs' leases were renewed: they may go on until ``until`` (monotonic)."""
        with self._lock:
            for run in runs:
                run.lease_expires = until

    def release_all(self) -> list[Run]:
        """Settle every unfinished run as released (shutdown) and return them."""
        released = []
        for run in self.unsettled():
            if self._settle(run, Released("worker shut down before the job finished")):
                self._abandon(run)
                released.append(run)
        return released

    def _abandon(self, run: Run) -> None:
        if run.context is not None:
            run.context.cancelled.set()
        task = run._task
        if task is not None and self._loop is not None:
            # async handlers really stop: CancelledError at their await
            self._loop.call_soon_threadsafe(task.cancel)

    def shutdown(self) -> None:
        """Stop idle threads and the loop; busy daemon threads die with the process."""
        for _ in self._threads:
            self._inbox.put(None)
        if self._loop is not None and self._loop_thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop_thread.join(timeout=5)


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Run async handlers until stopped, then cancel what is left and close the loop."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        leftovers = asyncio.all_tasks(loop)
        for task in leftovers:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


async def _invoke(run: Run) -> Any:
    assert run.handler is not None
    if run.trace is None:  # not traced: the common case, no coroutine more
        return await run.handler.call(run.job.payload, run.context)
    return await call_handler_async(run)


def call_handler(run: Run) -> Any:
    """Call a sync run's handler (through its middleware, in its span if traced); return its
    result."""
    handler = run.handler
    if handler is None:
        raise RuntimeError("no handler")  # unknown kinds are settled before submit
    if run.trace is not None:
        return tracing.run_in_span(
            run.job, run.trace, lambda: handler.call(run.job.payload, run.context)
        )
    return handler.call(run.job.payload, run.context)


async def call_handler_async(run: Run) -> Any:
    """Await an async run's handler (through its middleware, in its span if traced); return
    its result."""
    handler = run.handler
    assert handler is not None
    if run.trace is not None:
        return await tracing.run_in_span_async(
            run.job, run.trace, lambda: handler.call(run.job.payload, run.context)
        )
    return await handler.call(run.job.payload, run.context)
