"""The checks the Python API runs on its arguments before any SQL: times every reader can
decode, and payloads PostgreSQL's ``jsonb`` accepts, so bad input raises a ``TypeError`` or
``ValueError`` naming the argument instead of breaking the caller's transaction.

Pure: no I/O, no clock; the dashboard's filters use the same bounds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

# A run_at is read back by psycopg in the session's time zone (any offset up to about
# ±16 h) and by Python, whose datetime ends at the years 1 and 9999: two days inside both
# ends, every reader can decode it.
EARLIEST_RUN_AT = datetime(1, 1, 3, tzinfo=UTC)
LATEST_RUN_AT = datetime(9999, 12, 29, tzinfo=UTC)
# A delay counts from the database clock, unknown before the statement runs: a thousand
# years either way keeps now + delay far inside the years above.
MAX_DELAY = timedelta(days=365_250)


def check_run_at(run_at: object, name: str = "run_at") -> None:
    """Refuse a ``run_at`` that is not an aware datetime between the years 1 and 9999."""
    if run_at is None:
        return
    if not isinstance(run_at, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(run_at).__name__}")
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")
    if not EARLIEST_RUN_AT <= run_at <= LATEST_RUN_AT:
        raise ValueError(
            f"{name} {run_at.isoformat()} is out of range: give a time between "
            f"{EARLIEST_RUN_AT:%Y-%m-%d} and {LATEST_RUN_AT:%Y-%m-%d} (UTC)"
        )


def check_delay(delay: object, name: str = "delay") -> None:
    """Refuse a delay that is not a ``timedelta`` of at most a thousand years either way.

    A number is refused rather than read as seconds: ``delay=timedelta(seconds=3600)``
    says its unit, ``delay=3600`` does not.
    """
    if delay is None:
        return
    if not isinstance(delay, timedelta):
        raise TypeError(
            f"{name} must be a datetime.timedelta (e.g. timedelta(seconds=3600)), "
            f"got {type(delay).__name__}"
        )
    if abs(delay) > MAX_DELAY:
        raise ValueError(f"{name} {delay} is out of range: at most {MAX_DELAY.days} days")


def check_times(run_at: object, delay: object, max_wait: object = None) -> None:
    """The time arguments of ``enqueue`` and ``reschedule``, checked before any SQL."""
    check_run_at(run_at)
    check_delay(delay)
    check_delay(max_wait, "max_wait")
    if isinstance(max_wait, timedelta) and max_wait < timedelta(0):
        raise ValueError("max_wait must not be negative")


def check_names(**names: object) -> None:
    """Refuse a kind or key that is not a non-empty string (``kind=..., job_key=...``)."""
    for name, value in names.items():
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, got {type(value).__name__}")
        if not value:
            raise ValueError(f"{name} must not be empty")


def payload_text_problem(text: str, value: Any) -> str | None:
    """Why the JSON ``text`` of ``value`` (written with ``ensure_ascii``) cannot be ``jsonb``.

    ``jsonb`` refuses a NUL character and a lone UTF-16 surrogate in a string. Both show in
    ``text`` as ``\\u`` escapes, so a payload without such an escape skips the walk.
    """
    if "\\u0000" not in text and "\\ud" not in text:
        return None
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "a string in the payload contains a NUL character"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "a string in the payload contains a lone surrogate (not valid Unicode)"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return None


# A job's tags are labels to filter by, not data: a few short ones. pgbeat_enqueue() (SQL,
# migration 0016) keeps the same limits.
MAX_TAGS = 20
MAX_TAG_LENGTH = 100  # characters


def check_tags(tags: object, name: str = "tags") -> list[str] | None:
    """``tags`` as stored: a list of non-empty strings (None when there are none).

    A lone string is refused rather than read as its characters.
    """
    if tags is None:
        return None
    if not isinstance(tags, list | tuple):
        raise TypeError(f"{name} must be a list of strings, got {type(tags).__name__}")
    values = list(tags)
    if len(values) > MAX_TAGS:
        raise ValueError(f"{name}: {len(values)} tags, at most {MAX_TAGS} are allowed")
    for tag in values:
        if not isinstance(tag, str) or not tag:
            raise ValueError(f"{name}: a tag must be a non-empty string, got {tag!r}")
        if len(tag) > MAX_TAG_LENGTH:
            raise ValueError(
                f"{name}: the tag {tag[:40]!r}... has {len(tag)} characters, "
                f"at most {MAX_TAG_LENGTH} are allowed"
            )
        if "\x00" in tag:
            raise ValueError(f"{name}: the tag {tag[:40]!r} contains a NUL character")
    return values or None
