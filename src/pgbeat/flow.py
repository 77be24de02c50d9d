"""Flow control's values: queue names, priorities, limit keys, concurrency limits and rates.

Pure: the API, the CLI and the dashboard check the same things the same way, before any
statement runs, so a bad value is refused with one line and nothing is half-applied.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pgbeat.durations import format_duration, parse_duration
from pgbeat.limits import key_problem

DEFAULT_QUEUE = "default"
MAX_QUEUE_LENGTH = 200  # characters, as the pgbeat_queues check says
MIN_PRIORITY = -(2**15)  # jobs.priority is a smallint
MAX_PRIORITY = 2**15 - 1
MAX_LIMIT = 2**31 - 1  # limits are int columns
MAX_RATE_PERIOD = timedelta(days=1)  # the claim keeps this much start history at most
UNSET: Any = object()  # configure_queue's "leave as it is"


@dataclass(frozen=True)
class Rate:
    """At most ``count`` starts in any window of ``period``."""

    count: int
    period: timedelta

    def __str__(self) -> str:
        return f"{self.count}/{format_duration(self.period)}"


@dataclass(frozen=True)
class QueueLimits:
    """A queue's limits; None is no limit."""

    concurrency: int | None = None
    key_concurrency: int | None = None
    rate: Rate | None = None
    key_rate: Rate | None = None


def parse_rate(text: str, name: str = "rate") -> Rate:
    """``"N/D"`` (e.g. ``"100/10s"``) as a Rate; ``ValueError`` naming ``name`` otherwise."""
    count_text, slash, period_text = text.strip().partition("/")
    if not slash or not (count_text.strip().isascii() and count_text.strip().isdigit()):
        raise ValueError(f"{name} {text!r}: expected N/DURATION, e.g. 100/10s")
    try:
        period = parse_duration(period_text)
    except ValueError as exc:
        raise ValueError(f"{name} {text!r}: {exc}") from None
    return rate_value(Rate(int(count_text), period), name)


def rate_value(value: object, name: str = "rate") -> Rate:
    """A Rate, from a Rate or its ``"N/D"`` text; checked."""
    if isinstance(value, str):
        return parse_rate(value, name)
    if not isinstance(value, Rate):
        raise TypeError(f"{name} must be text like '100/10s', got {type(value).__name__}")
    if not 1 <= value.count <= MAX_LIMIT:
        raise ValueError(f"{name}: the count must be between 1 and {MAX_LIMIT}")
    if value.period > MAX_RATE_PERIOD:
        raise ValueError(f"{name}: the period must be at most {format_duration(MAX_RATE_PERIOD)}")
    if value.period < timedelta(milliseconds=1):
        raise ValueError(f"{name}: the period must be at least 1ms")
    return value


def limit_value(value: object, name: str) -> int:
    """A concurrency limit: a whole number from 1 up."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a whole number, got {type(value).__name__}")
    if not 1 <= value <= MAX_LIMIT:
        raise ValueError(f"{name} must be between 1 and {MAX_LIMIT} (pause a queue to run none)")
    return value


def queue_problem(queue: object) -> str | None:
    """Why ``queue`` cannot name a queue, or None."""
    if not isinstance(queue, str) or not queue:
        return "must be a non-empty string"
    if len(queue) > MAX_QUEUE_LENGTH:
        return f"has {len(queue)} characters, at most {MAX_QUEUE_LENGTH} are allowed"
    if "\x00" in queue:
        return "contains a NUL character"
    if queue != queue.strip():
        return "has leading or trailing spaces"
    return None


def check_queue(queue: object) -> str:
    """``queue`` as a queue name; ``ValueError`` naming it otherwise."""
    problem = queue_problem(queue)
    if problem is not None:
        raise ValueError(f"queue {_shown(queue)}: {problem}")
    assert isinstance(queue, str)
    return queue


def check_priority(priority: object) -> int:
    """``priority`` as stored in the smallint column; higher runs first."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority must be a whole number, got {type(priority).__name__}")
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}")
    return priority


def check_limit_key(limit_key: object) -> str | None:
    """``limit_key`` (None, or a non-empty key like a job key)."""
    if limit_key is None:
        return None
    if not isinstance(limit_key, str) or not limit_key:
        raise ValueError("limit_key must be None or a non-empty string")
    problem = key_problem(limit_key)
    if problem is not None:
        raise ValueError(f"limit_key {_shown(limit_key)}: {problem}")
    return limit_key


def check_flow(queue: object, priority: object, limit_key: object) -> tuple[str, int, str | None]:
    """A job's flow-control fields, checked together."""
    return check_queue(queue), check_priority(priority), check_limit_key(limit_key)


def merged_limits(
    current: QueueLimits,
    concurrency: object = UNSET,
    key_concurrency: object = UNSET,
    rate: object = UNSET,
    key_rate: object = UNSET,
) -> QueueLimits:
    """``current`` with the given limits replaced (None clears one); every value checked."""
    return QueueLimits(
        concurrency=_pick(current.concurrency, concurrency, "concurrency", limit_value),
        key_concurrency=_pick(
            current.key_concurrency, key_concurrency, "key_concurrency", limit_value
        ),
        rate=_pick(current.rate, rate, "rate", rate_value),
        key_rate=_pick(current.key_rate, key_rate, "key_rate", rate_value),
    )


def _pick(current: Any, given: object, name: str, check: Any) -> Any:
    if given is UNSET:
        return current
    if given is None or given == "none":
        return None
    return check(given, name)


def limited(limits: QueueLimits) -> bool:
    """Whether any limit is set (a queue without one is claimed on the fast path)."""
    return any(
        value is not None
        for value in (limits.concurrency, limits.key_concurrency, limits.rate, limits.key_rate)
    )


def rate_text(count: int | None, period: timedelta | None) -> str | None:
    """A stored rate as ``"N/D"``, or None."""
    if count is None or period is None:
        return None
    return str(Rate(count, period))


def unserved_kinds(
    pending: Sequence[tuple[str, str, int]], workers: Sequence[object]
) -> list[tuple[str, str, int]]:
    """The (kind, queue, pending count) that no live worker claims.

    ``workers`` are the heartbeat details of live workers: ``kinds`` they claim, ``queues``
    they take (None or absent: every queue).
    """
    readable = [worker_details(details) for details in workers]
    return [
        (kind, queue, count)
        for kind, queue, count in pending
        if not any(
            kind in (details.get("kinds") or ())
            and (not details.get("queues") or queue in details["queues"])
            for details in readable
        )
    ]


def worker_details(details: object) -> dict[str, Any]:
    """A worker's heartbeat details as readers may rely on them: an object, with ``kinds`` a
    list of text and ``queues`` a list of text or None. The worker role writes them: odd
    values (a list, ``"kinds": 5``) never break `pgbeat status` or the Processes page."""
    if not isinstance(details, Mapping):
        return {}
    shown = {str(key): value for key, value in details.items()}
    for key in ("kinds", "queues"):
        value = shown.get(key)
        if value is not None:
            texts = [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
            shown[key] = texts if texts or key == "kinds" else None
    return shown


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 42 else text[:40] + "..."
