"""The jobs list's filters: read from the URL, checked, and turned into query parameters.

Pure. Filters live in the query string so a view can be bookmarked and shared, and the
confirm page of a bulk action carries the very same filter. Bad values are reported,
never guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from pgbeat import flow, job_inputs
from pgbeat.ui.redact import SECRET_KEY

STATUSES = ("pending", "running", "done", "failed", "cancelled")
WHEN = ("due", "later")
SEARCH_WINDOW = 200_000  # ids searched per page when no partial index narrows the filter
MAX_TEXT = 500
MAX_PAYLOAD_DEPTH = 32  # levels of nesting in a payload filter
# Which actions each status allows, and the status an action requires.
# The statements behind them (jobs/actions.py) are the CLI's: retry takes any job that is
# not running, cancel a pending or a running one (a running one is told to stop).
ACTIONS_FOR_STATUS = {
    "pending": ("run_now", "cancel"),
    "running": ("cancel",),
    "done": ("retry", "delete"),
    "failed": ("retry", "delete"),
    "cancelled": ("retry", "delete"),
}
ACTION_WORDS = {"run_now": "Run now", "cancel": "Cancel", "retry": "Retry", "delete": "Delete"}
ACTION_DONE = {
    "run_now": "moved to now",
    "cancel": "cancelled",
    "retry": "retried",
    "delete": "deleted",
}


class FilterError(ValueError):
    """A filter value that cannot be used; the message names the field."""


@dataclass(frozen=True)
class JobFilter:
    """One view of the jobs table; every field optional."""

    status: str | None = None
    when: str | None = None  # pending only: due now, or scheduled for later
    kind: str | None = None
    schedule: str | None = None
    unique_key: str | None = None
    id: int | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    finished_from: datetime | None = None
    finished_to: datetime | None = None
    payload: str | None = None  # a JSON object, as typed
    error: str | None = None
    signature: str | None = None
    queue: str | None = None
    priority: int | None = None
    limit_key: str | None = None
    tag: str | None = None
    workflow: int | None = None  # the steps of one workflow (its step rows, then ids)

    @classmethod
    def from_query(cls, query: Mapping[str, str], *, hide_payloads: bool = False) -> JobFilter:
        """Read the filter from URL parameters; raise ``FilterError`` on a bad value.

        A payload filter is refused when payloads are hidden, and on a key whose values
        the dashboard masks: its answer would tell what the page does not show.
        """
        values: dict[str, Any] = {}
        for field in fields(cls):
            raw = (query.get(field.name) or "").strip()
            if not raw:
                continue
            if len(raw) > MAX_TEXT and field.name != "payload":
                raise FilterError(f"{field.name}: at most {MAX_TEXT} characters")
            if any(ord(c) < 32 or ord(c) == 127 for c in raw):
                raise FilterError(
                    f"{field.name}: control characters (NUL, newline) are not allowed"
                )
            if field.name == "payload" and hide_payloads:
                raise FilterError(
                    "payload: payloads are hidden (--hide-payloads), so they cannot be filtered"
                )
            values[field.name] = _convert(field.name, raw)
        return cls(**values)

    def query(self, **extra: str | int | None) -> str:
        """The URL query string of this filter (plus ``extra``), for links and forms."""
        pairs = [(k, _text(v)) for k, v in self._items()]
        pairs += [(k, str(v)) for k, v in extra.items() if v is not None and v != ""]
        return urlencode(pairs)

    def pairs(self) -> list[tuple[str, str]]:
        """The filter as (name, value) pairs, for hidden form fields."""
        return [(k, _text(v)) for k, v in self._items()]

    def is_empty(self) -> bool:
        return not self._items()

    def describe(self) -> str:
        """``status = failed, kind = email, payload ⊇ {"user": 7}``."""
        words = {"payload": "payload \u2287", "error": "error contains"}
        return ", ".join(f"{words.get(k, k + ' =')} {_text(v)}" for k, v in self._items())

    def actions(self) -> tuple[str, ...]:
        """The bulk actions valid for every job this filter can match."""
        return ACTIONS_FOR_STATUS.get(self.status or "", ())

    def searches_window(self) -> bool:
        """Whether a search must be bounded to a window of ids to stay off a full scan.

        Not when no filter is set (the newest rows come first), an id is given, or a
        status other than done is filtered on only by indexed fields: its partial index
        bounds the rows read. Payload, error text, error signature and creation time are
        read row by row.
        """
        if self.is_empty() or self.id is not None or self.workflow is not None:
            return False
        if self.tag is not None and self.status != "done":  # jobs_tags narrows it
            return False
        row_by_row = any(
            v is not None
            for v in (
                self.payload,
                self.error,
                self.signature,
                self.created_from,
                self.created_to,
                self.queue,
                self.priority,
                self.limit_key,
            )
        )
        return row_by_row or self.status not in ("pending", "running", "failed")

    def with_status(self, status: str | None) -> JobFilter:
        return replace(self, status=status, when=None if status != "pending" else self.when)

    def params(self, kind_of_schedule: str | None = None) -> dict[str, Any]:
        """The SQL parameters of ``_JOBS_FILTER`` (without floor, max_id and paging)."""
        return {
            "status": self.status,
            "due": None if self.when is None else self.when == "due",
            "kind": self.kind or kind_of_schedule,
            "key_like": None if self.schedule is None else _like_prefix(self.schedule + "@"),
            "unique_key": self.unique_key,
            "id": self.id,
            "created_from": self.created_from,
            "created_to": self.created_to,
            "finished_from": self.finished_from,
            "finished_to": self.finished_to,
            "payload": self.payload,
            "error_like": None if self.error is None else "%" + _like_escape(self.error) + "%",
            "signature": self.signature,
            "queue": self.queue,
            "priority": self.priority,
            "limit_key": self.limit_key,
            "tag": self.tag,
            "workflow": self.workflow,
            "floor": None,
            "max_id": None,
        }

    def _items(self) -> list[tuple[str, Any]]:
        return [
            (f.name, getattr(self, f.name))
            for f in fields(self)
            if getattr(self, f.name) is not None
        ]


def _convert(name: str, raw: str) -> Any:
    if name == "status":
        if raw not in STATUSES:
            raise FilterError(f"status: one of {', '.join(STATUSES)}")
        return raw
    if name == "when":
        if raw not in WHEN:
            raise FilterError("when: due or later")
        return raw
    if name == "id":
        if not raw.isdigit() or len(raw) > 18:
            raise FilterError("id: a job id (digits)")
        return int(raw)
    if name == "workflow":
        if not raw.isdigit() or len(raw) > 18:
            raise FilterError("workflow: a workflow id (digits)")
        return int(raw)
    if name == "priority":
        try:
            return flow.check_priority(int(raw))
        except ValueError:
            raise FilterError(
                f"priority: a whole number from {flow.MIN_PRIORITY} to {flow.MAX_PRIORITY}"
            ) from None
    if name.endswith(("_from", "_to")):
        return _instant(name, raw)
    if name == "payload":
        return _payload(raw)
    return raw


def _instant(name: str, raw: str) -> datetime:
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise FilterError(f"{name}: a date or time like 2026-12-01 or 2026-12-01T09:30Z") from None
    value = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if not job_inputs.EARLIEST_RUN_AT <= value <= job_inputs.LATEST_RUN_AT:
        raise FilterError(f"{name}: a time between the years 1 and 9999")
    return value


def _payload(raw: str) -> str:
    if len(raw) > 4000:
        raise FilterError("payload: at most 4,000 characters of JSON")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise FilterError(f"payload: not JSON ({exc.msg} at character {exc.pos})") from None
    except RecursionError:
        raise FilterError("payload: nested too deeply") from None
    if not isinstance(value, dict):
        raise FilterError('payload: a JSON object the payload contains, like {"user_id": 42}')
    _check_payload_filter(value)
    try:
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)
    except ValueError:
        raise FilterError("payload: NaN and Infinity are not JSON") from None
    problem = job_inputs.payload_text_problem(text, value)
    if problem is not None:
        raise FilterError(f"payload: {problem}")
    return text


def _check_payload_filter(value: Any) -> None:
    """Refuse a filter too deep to be a question, or one that asks about a masked key."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_PAYLOAD_DEPTH:
            raise FilterError(f"payload: at most {MAX_PAYLOAD_DEPTH} levels of nesting")
        if isinstance(item, dict):
            for key, inner in item.items():
                if SECRET_KEY.search(key):
                    raise FilterError(
                        f"payload: {key!r} looks like a secret, whose values the dashboard "
                        "masks: it cannot be filtered on"
                    )
                stack.append((inner, depth + 1))
        elif isinstance(item, list):
            stack.extend((inner, depth + 1) for inner in item)


def _text(value: Any) -> str:
    if isinstance(value, datetime):
        return f"{value.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
    return str(value)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _like_prefix(text: str) -> str:
    return _like_escape(text) + "%"
