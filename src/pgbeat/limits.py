"""What a row of ``jobs`` can hold, checked with a clear message before PostgreSQL refuses it.

``(kind, unique_key)`` is indexed by a btree (``jobs_unique``) whose entries must fit in
about 2,700 bytes, or PostgreSQL refuses the insert (SQLSTATE 54000). pgbeat keeps well
under that: a kind or a schedule's name has at most 200 characters (800 bytes of UTF-8
at worst), a unique key or job key at most 1,000 bytes of UTF-8. Text columns cannot
hold NUL, and ``max_attempts`` is a 32-bit integer. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

MAX_KIND_LENGTH = 200  # characters; also a schedule's name
MAX_KEY_BYTES = 1000  # bytes of UTF-8: a unique key or a job key
MAX_ATTEMPTS = 2**31 - 1  # the int column's largest value


def kind_problem(kind: str) -> str | None:
    """Why ``kind`` cannot be stored as a job's kind, or None."""
    if len(kind) > MAX_KIND_LENGTH:
        return f"has {len(kind)} characters, at most {MAX_KIND_LENGTH} are allowed"
    if "\x00" in kind:
        return "contains a NUL character"
    return None


def key_problem(key: str) -> str | None:
    """Why ``key`` cannot be stored as a unique key or a job key, or None."""
    if "\x00" in key:
        return "contains a NUL character"
    if len(key) <= MAX_KEY_BYTES // 4:  # short enough whatever its characters: skip encoding
        return None
    size = len(key.encode("utf-8", "surrogatepass"))
    if size > MAX_KEY_BYTES:
        return f"has {size} bytes of UTF-8, at most {MAX_KEY_BYTES} are allowed"
    return None


def payload_problem(payload: Any) -> str | None:
    """Why JSON data cannot be stored as ``jsonb``: a NUL in a string or a key; else None.

    Iterative, so a deeply nested payload is no deeper a problem here.
    """
    stack = [payload]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return f"the string {_shown(value)} contains a NUL character"
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return None


def check_job_text(kind: str, key: str | None = None, key_name: str = "unique_key") -> None:
    """Raise ``ValueError`` when a job's kind or key could not be stored."""
    problem = kind_problem(kind)
    if problem is not None:
        raise ValueError(f"kind {_shown(kind)}: {problem}")
    if isinstance(key, str):
        problem = key_problem(key)
        if problem is not None:
            raise ValueError(f"{key_name} {_shown(key)}: {problem}")


def _shown(text: str) -> str:
    """The head of a possibly huge value, for a one-line message."""
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}..."
