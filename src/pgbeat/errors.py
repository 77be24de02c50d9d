"""Exceptions of pgbeat: the ones handlers raise to steer a job, and the ones pgbeat raises.

Everything the CLI reports to a user derives from ``PgbeatError`` and carries a one-line message.
"""

from __future__ import annotations

from datetime import datetime, timedelta


class PgbeatError(Exception):
    """Base of the errors pgbeat reports to its user in one line."""


class DatabaseUnavailable(PgbeatError):
    """The database could not be reached (the message never contains the password)."""


class NotMigrated(PgbeatError):
    """The schema is missing or older than this version of pgbeat expects."""


class UserError(PgbeatError):
    """Bad input on the command line."""


class ConfigError(PgbeatError):
    """An invalid schedules.toml; ``problems`` holds one line per mistake."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class UiError(PgbeatError):
    """The dashboard cannot start with these settings (e.g. a public address without a token)."""


class JobNotFound(PgbeatError):
    """No job has this id."""


class Refused(PgbeatError):
    """The job is in a state that does not allow the action."""


class KeyContended(PgbeatError):
    """A job_key's live job was claimed again and again while an enqueue replaced it."""


class ScheduleError(PgbeatError, ValueError):
    """A schedule given in code is invalid, or the change is not allowed (one line)."""


class ScheduleConflict(ScheduleError):
    """The schedule belongs to a schedules file: code may not change or delete it."""


class ScheduleNotFound(PgbeatError):
    """No schedule has this name."""


class UnknownKind(PgbeatError):
    """No handler is registered for a job's kind."""


class PayloadError(PgbeatError):
    """A payload is not valid JSON, or does not validate against the handler's model."""


class PermanentError(Exception):
    """Raised by a handler: fail the job now, without using its remaining attempts."""


class Retry(Exception):
    """Raised by a handler: run the job again later, at a time it chooses.

    ``after`` is a delay (``timedelta`` or seconds) or an aware ``datetime``. The attempt
    still counts, so a job that keeps asking for a retry ends in ``failed`` like any other.
    """

    def __init__(
        self, after: timedelta | float | datetime, reason: str = "retry requested"
    ) -> None:
        super().__init__(reason)
        if isinstance(after, int | float):
            after = timedelta(seconds=after)
        if isinstance(after, datetime) and after.tzinfo is None:
            raise ValueError("Retry(after=datetime) needs a timezone-aware datetime")
        self.after: timedelta | datetime = after


class Snooze(Exception):
    """Raised by a handler: run the job again later, without counting this run as an attempt.

    ``after`` is a delay (``timedelta`` or seconds) or an aware ``datetime``. However often a
    job snoozes, its ``max_attempts`` never runs out: each snooze adds one to it, so the
    attempts left stay what they were (``attempts`` still counts every run).
    """

    def __init__(self, after: timedelta | float | datetime, reason: str = "snoozed") -> None:
        super().__init__(reason)
        if isinstance(after, bool) or not isinstance(after, timedelta | int | float | datetime):
            raise TypeError("Snooze(after) takes a timedelta, seconds or an aware datetime")
        if isinstance(after, int | float):
            after = timedelta(seconds=after)
        if isinstance(after, datetime) and after.tzinfo is None:
            raise ValueError("Snooze(after=datetime) needs a timezone-aware datetime")
        self.after: timedelta | datetime = after


class CancelRequested(Exception):
    """Someone cancelled a running job (the worker's verdict, never raised to a user)."""


class ResultError(Exception):
    """A handler's return value cannot be stored: not JSON, or larger than the limit."""


class TimedOut(Exception):
    """A handler outlived its timeout (the worker's verdict, never raised to a user)."""


class Released(Exception):
    """The worker gave up on a run at shutdown; the job goes back to pending."""
