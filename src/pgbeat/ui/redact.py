"""Payloads as the dashboard shows them: secret-looking values masked, long ones cut.

Pure. A key whose name mentions a password, secret, token, API key, credential or
authorization keeps its name and loses its value, at any depth; ``--hide-payloads``
hides every payload instead.
"""

from __future__ import annotations

import json
import re
from typing import Any

MASK = "\u2022\u2022\u2022\u2022\u2022\u2022"
SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[-_]?key|private[-_]?key|credential|auth|"
    r"cookie|session|signature|ssn|card[-_]?number|cvv",
    re.IGNORECASE,
)
MAX_SHOWN = 64 * 1024  # characters of formatted JSON on a detail page
MAX_DEPTH = 50


def mask_secrets(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` with the values of secret-looking keys replaced by a mask."""
    if depth > MAX_DEPTH:
        return MASK
    if isinstance(value, dict):
        return {
            key: MASK if SECRET_KEY.search(str(key)) else mask_secrets(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [mask_secrets(item, depth + 1) for item in value]
    return value


def payload_text(payload: Any, *, hidden: bool, pretty: bool) -> str:
    """The payload as JSON for display (masked, cut at ``MAX_SHOWN``), or a notice."""
    if hidden:
        return "(payloads are hidden: --hide-payloads)"
    text = json.dumps(
        mask_secrets(payload), indent=2 if pretty else None, ensure_ascii=False, sort_keys=True
    )
    limit = MAX_SHOWN if pretty else 120
    return text if len(text) <= limit else text[:limit] + "\u2026"
