"""A handler's return value as the JSON text ``jobs.result`` stores, or why it cannot be.

Pure: JSON data (dicts, lists, strings, numbers, booleans) or a pydantic model become at
most ``RESULT_LIMIT`` bytes of JSON; anything else is the job's failure, not the worker's.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic

from pgbeat.errors import ResultError

RESULT_LIMIT = 64 * 1024  # bytes of JSON (UTF-8) a result may take

_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def encode_result(value: Any) -> str | None:
    """``value`` as JSON text; ``None`` for ``None`` (no result). Raises ``ResultError``."""
    if value is None:
        return None
    try:
        text = value.model_dump_json() if isinstance(value, pydantic.BaseModel) else _encode(value)
    except Exception as exc:  # a value's own code may raise anything: the job's fault alone
        raise ResultError(
            f"the handler's return value cannot be stored as JSON ({type(value).__name__}: "
            f"{_first_line(exc)}); return JSON data or a pydantic model"
        ) from None
    if "\x00" in text or "\\u0000" in text:
        raise ResultError("the handler's return value contains NUL, which jsonb cannot store")
    try:
        size = len(text.encode())
    except UnicodeEncodeError:
        raise ResultError(
            "the handler's return value has a string UTF-8 cannot encode (a lone surrogate)"
        ) from None
    if size > RESULT_LIMIT:
        raise ResultError(
            f"the handler's return value is {size:,} bytes of JSON, more than the "
            f"{RESULT_LIMIT // 1024} KiB a result may take; store large data elsewhere "
            "and return a reference to it"
        )
    return text


def _first_line(exc: BaseException) -> str:
    """The first line of ``str(exc)``, or its type's name when even that raises."""
    try:
        return str(exc).strip().partition("\n")[0][:200]
    except Exception:
        return type(exc).__name__
