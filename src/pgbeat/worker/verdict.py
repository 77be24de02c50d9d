"""What a run's result means for its job: done, retry (when), snoozed (when), failed,
released or cancelled.

Pure: it maps (job, exception, backoff policy, random generator) to a decision, so the
whole retry policy is tested without a database or a clock.
"""

from __future__ import annotations

import random
import traceback
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from pgbeat.backoff import BackoffPolicy, retry_delay
from pgbeat.errors import (
    CancelRequested,
    PayloadError,
    PermanentError,
    Released,
    ResultError,
    Retry,
    Snooze,
    TimedOut,
    UnknownKind,
)
from pgbeat.job import Job

Verdict = Literal["done", "retry", "snoozed", "failed", "released", "cancelled"]

# Failures that retrying cannot fix: they go to `failed` at once.
_PERMANENT = (PermanentError, PayloadError, UnknownKind, ResultError)
# Failures whose message says it all; a traceback would only point into pgbeat.
_NO_TRACEBACK = (
    TimedOut,
    PayloadError,
    UnknownKind,
    Released,
    Retry,
    Snooze,
    CancelRequested,
    ResultError,
)


@dataclass(frozen=True)
class Outcome:
    verdict: Verdict
    error: str | None = None
    retry_at: datetime | timedelta | None = None  # absolute, or a delay from the database clock


def decide(
    job: Job, error: BaseException | None, policy: BackoffPolicy, rng: random.Random
) -> Outcome:
    """The outcome of one run of ``job`` that ended with ``error`` (``None``: success)."""
    if error is None:
        return Outcome("done")
    if isinstance(error, Released):
        return Outcome("released")
    text = describe_error(error)
    if isinstance(error, CancelRequested):
        return Outcome("cancelled", text)
    if isinstance(error, Snooze):  # before the attempts test: a snooze spends no attempt
        return Outcome("snoozed", text, error.after)
    if isinstance(error, _PERMANENT):
        return Outcome("failed", text)
    if job.attempt >= job.max_attempts:
        return Outcome("failed", text)
    if isinstance(error, Retry):
        return Outcome("retry", text, error.after)
    return Outcome("retry", text, retry_delay(job.attempt, policy, rng))


def describe_error(error: BaseException) -> str:
    """``Type: message``, followed by the traceback for errors raised by handler code."""
    headline = f"{type(error).__name__}: {error_text(error)}".rstrip(": ")
    if isinstance(error, _NO_TRACEBACK) or error.__traceback__ is None:
        return headline
    stack = "".join(traceback.format_tb(error.__traceback__))
    return f"{headline}\n{stack}".rstrip()


def error_text(error: BaseException) -> str:
    """``str(error)``, or a stand-in when the exception's own ``__str__`` raises."""
    try:
        return str(error)
    except Exception as broken:  # a handler's exception must not stop the worker
        return f"<str() of this exception raised {type(broken).__name__}>"
