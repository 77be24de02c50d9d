"""What a worker says of the runs it finished: a line per run that did not simply end done
(and per done run with ``pgbeat.worker.jobs`` at INFO), and once a minute a summary line.

outcomes.py writes the outcomes; this module only words them.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta

from pgbeat.worker import operations
from pgbeat.worker.executor import Run
from pgbeat.worker.verdict import Outcome, error_text

log = logging.getLogger("pgbeat.worker")
job_log = logging.getLogger("pgbeat.worker.jobs")  # observe/logs.JOB_LINES: done, snoozed
SUMMARY_EVERY = 60.0  # seconds between two summary lines of a worker's outcomes
MAX_LOGGED_ERROR = 500  # characters of an error's first line in a log line


class OutcomeTally:
    """Outcomes counted since the last summary line, and when that line was written."""

    def __init__(self) -> None:
        self._tally: Counter[str] = Counter()
        self._summed = time.monotonic()

    def count(self, decided: Sequence[tuple[Run, Outcome]], plain: bool) -> None:
        """Count outcomes (``plain``: every one done); once a minute, one INFO line of what
        the worker finished (the line a quiet worker still writes when every job succeeds)."""
        if plain:
            self._tally["done"] += len(decided)
        else:
            self._tally.update(outcome.verdict for _, outcome in decided)
        now = time.monotonic()
        seconds = now - self._summed
        if seconds < SUMMARY_EVERY or not log.isEnabledFor(logging.INFO):
            return
        tally, self._tally, self._summed = self._tally, Counter(), now
        total = sum(tally.values())
        counts = {
            "done": tally["done"],
            "retried": tally["retry"],
            "failed": tally["failed"],
            "snoozed": tally["snoozed"],
            "cancelled": tally["cancelled"],
            "released": tally["released"],
        }
        shown = ", ".join(f"{n:,} {name}" for name, n in counts.items() if n)
        log.info(
            "finished %s jobs in the last %.0fs (%.1f/s): %s",
            f"{total:,}",
            seconds,
            total / seconds,
            shown,
            extra={**counts, "seconds": round(seconds, 1)},
        )


def first_line(exc: BaseException) -> str:
    """An error's first line, printable and cut to MAX_LOGGED_ERROR characters."""
    return operations.printable(error_text(exc).strip().partition("\n")[0][:MAX_LOGGED_ERROR])


def log_outcome(run: Run, outcome: Outcome) -> None:
    """The line of one finished run, at the level its outcome calls for (none if off)."""
    succeeded = outcome.verdict in ("done", "snoozed")
    if not (job_log if succeeded else log).isEnabledFor(
        logging.ERROR
        if outcome.verdict == "failed"
        else logging.INFO
        if succeeded
        else logging.WARNING
    ):
        return  # a busy worker finishes thousands of jobs a second: skip building the line
    job = run.job
    took_ms = round(run.duration * 1000, 1)
    fields = {
        "job_id": job.id,
        "kind": job.kind,
        "attempt": job.attempt,
        "duration_ms": took_ms,
        "outcome": outcome.verdict,
    }
    where = f"job {job.id} {job.kind} attempt {job.attempt}/{job.max_attempts}"
    # the first line only, and not all of it: a handler may raise with a 10 MB message
    message = operations.printable((outcome.error or "")[:MAX_LOGGED_ERROR].partition("\n")[0])
    if outcome.verdict == "done":
        job_log.info("%s done in %.1fms", where, took_ms, extra=fields)
    elif outcome.verdict == "retry":
        when = outcome.retry_at
        when_text = (
            f"in {when.total_seconds():.1f}s" if isinstance(when, timedelta) else f"at {when}"
        )
        log.warning(
            "%s failed in %.1fms, retry %s: %s", where, took_ms, when_text, message, extra=fields
        )
    elif outcome.verdict == "failed":
        log.error("%s failed for good in %.1fms: %s", where, took_ms, message, extra=fields)
    elif outcome.verdict == "snoozed":
        job_log.info("%s snoozed after %.1fms", where, took_ms, extra=fields)
    elif outcome.verdict == "cancelled":
        log.warning("%s cancelled after %.1fms", where, took_ms, extra=fields)
    else:
        log.warning("%s released at shutdown after %.1fms", where, took_ms, extra=fields)
