"""What a job row's payload and attempts may be: JSON text jsonb accepts, within a size limit.

The rules every writer of jobs rows shares (enqueue, the scheduler's periods, backfills,
the dashboard's run now), so none of them depends on another to learn them.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pydantic

from pgbeat import job_inputs

DEFAULT_MAX_ATTEMPTS = 8  # the column default of migrations/0001_jobs.sql
MAX_PAYLOAD_ENV = "PGBEAT_MAX_PAYLOAD_BYTES"
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024


def max_payload_bytes() -> int:
    """The largest payload, in bytes of JSON text: ``$PGBEAT_MAX_PAYLOAD_BYTES``, else 1 MiB."""
    text = os.environ.get(MAX_PAYLOAD_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_PAYLOAD_BYTES
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{MAX_PAYLOAD_ENV} must be a whole number of bytes, got {text!r}")
    return int(text)


def encode_payload(payload: Any, limit: int | None = None) -> str:
    """A payload as JSON text, or ``ValueError`` when it is larger than ``limit`` bytes.

    A queue row is no place for a file: past the limit, store the data elsewhere and
    enqueue its address. ``limit`` defaults to ``max_payload_bytes()``.
    """
    value = json_value(payload)
    try:  # ASCII (\u escapes): one byte a character; NaN and Infinity are not JSON: jsonb
        # would refuse them and abort the caller's transaction.
        text = json.dumps(value, allow_nan=False)
    except RecursionError:
        raise ValueError("the payload is nested too deeply to encode as JSON") from None
    except ValueError:
        raise ValueError("the payload has a value JSON cannot hold: NaN or Infinity") from None
    except TypeError as exc:
        raise TypeError(f"the payload must be JSON data or a pydantic model: {exc}") from None
    problem = job_inputs.payload_text_problem(text, value)
    if problem is not None:
        raise ValueError(problem)
    limit = max_payload_bytes() if limit is None else limit
    if len(text) > limit:
        raise ValueError(
            f"the payload is {len(text)} bytes of JSON, more than the limit of {limit} "
            f"({MAX_PAYLOAD_ENV}): store large data elsewhere and enqueue a reference to it"
        )
    return text


def encoded(text: str) -> str:
    """Jsonb's dumps for text ``encode_payload`` already wrote."""
    return text


def json_value(payload: Any) -> Any:
    """A payload as plain JSON data: pydantic models are dumped, ``None`` becomes ``{}``."""
    if payload is None:
        return {}
    if isinstance(payload, pydantic.BaseModel):
        return payload.model_dump(mode="json")
    return payload
