"""Log output: one line per event, as text or as JSON (``--log-format``).

Structured fields (``job_id``, ``kind``, ``attempt``, ``duration_ms``, ``outcome``) are
passed with ``extra=`` and appear as JSON keys, or as ``key=value`` in text.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

FIELDS = (
    "job_id", "kind", "attempt", "duration_ms", "outcome", "schedule", "unique_key",
    # a scheduler tick's and a worker's summary lines
    "enqueued", "skipped", "missed", "buffered", "released", "cancelled", "took_ms",
    "done", "retried", "failed", "snoozed", "seconds",
)  # fmt: skip
# The worker's line for each job that succeeded (done, snoozed): `pgbeat worker` keeps it
# at WARNING unless --job-logs all, and logs failures and a summary a minute instead.
JOB_LINES = "pgbeat.worker.jobs"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in FIELDS:
            if hasattr(record, field):
                entry[field] = getattr(record, field)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Send pgbeat's logs to stderr in the chosen format (replaces earlier handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    quieter = max(logging.getLevelName(level), logging.WARNING)
    for noisy in ("psycopg.pool", "pgserver"):  # routine chatter at INFO
        logging.getLogger(noisy).setLevel(quieter)
    # psycopg warns again about a pipeline it abandons after a lost connection, which our
    # own one-line "database unavailable" already reported.
    logging.getLogger("psycopg").setLevel(max(logging.getLevelName(level), logging.ERROR))


def job_lines(every: bool) -> None:
    """Log a line for every job that succeeded (``every``), or only for the others."""
    logging.getLogger(JOB_LINES).setLevel(logging.NOTSET if every else logging.WARNING)
