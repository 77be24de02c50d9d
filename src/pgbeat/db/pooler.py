"""What every connection pgbeat opens may rely on: a session of its own, or a pooler's.

Behind pgbouncer in transaction mode (``PGBEAT_POOLER=transaction``, or ``--pooler
transaction``) consecutive transactions of one client run on different server connections,
so pgbeat keeps no session state there: no startup ``options`` (pgbouncer refuses them), no
session ``SET``, no session advisory lock, no prepared statement (psycopg prepares a query
after its fifth execution unless told not to), and no LISTEN: workers poll, or listen on a
direct connection given as ``PGBEAT_LISTEN_URL``.

Every connection also gets TCP timeouts unless its URL sets its own: through a network
partition a connection sees no error at all, and a statement sent into it would wait for
TCP's retransmissions to give up (about 15 minutes on Linux) before pgbeat could reconnect.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg

from pgbeat.db.schemas import with_schema
from pgbeat.errors import UserError

POOLER_ENV = "PGBEAT_POOLER"
LISTEN_URL_ENV = "PGBEAT_LISTEN_URL"
POOLER_MODES = ("none", "transaction")

# A dead peer is noticed within ~25 s on an idle connection (keepalive probes: 10 s of
# silence, then 3 unanswered probes 5 s apart), and within 30 s when sent data goes
# unacknowledged. Both are answered by the server's kernel, so a slow query is never cut.
TCP_TIMEOUTS = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",  # milliseconds
}


def pooler() -> str | None:
    """``"transaction"`` when pgbeat runs behind a transaction-pooling proxy; else None."""
    value = os.environ.get(POOLER_ENV, "").strip().lower()
    if value in ("", "none"):
        return None
    if value not in POOLER_MODES:
        raise UserError(
            f"{POOLER_ENV} must be one of {', '.join(POOLER_MODES)} (got {value!r}); "
            "session pooling needs no setting"
        )
    return value


def connection_options(url: str) -> dict[str, Any]:
    """Keyword arguments for ``psycopg.connect(url, ...)``: what the pooler and the network need.

    Settings the URL gives itself are left to it.
    """
    given = psycopg.conninfo.conninfo_to_dict(url)
    options: dict[str, Any] = {k: v for k, v in TCP_TIMEOUTS.items() if k not in given}
    if pooler() is not None:
        options["prepare_threshold"] = None
    return options


def session_options(url: str, settings: dict[str, str]) -> str | None:
    """The startup ``options`` that set ``settings`` for a session, after the URL's own.

    None behind a pooler: pgbouncer refuses the startup parameter, and a pooled session
    is not ours to configure (set such settings with ``ALTER ROLE ... SET`` instead).
    """
    if pooler() is not None:
        return None
    ours = " ".join(f"-c {name}={value}" for name, value in settings.items())
    theirs = str(psycopg.conninfo.conninfo_to_dict(url).get("options") or "")
    return f"{theirs} {ours}".strip() or None  # keep the URL's own (search_path...)


def listen_url(url: str) -> str | None:
    """Where a worker LISTENs for new jobs: ``PGBEAT_LISTEN_URL``, else ``url`` unless pooled."""
    explicit = os.environ.get(LISTEN_URL_ENV)
    if explicit:
        return with_schema(explicit)  # a direct connection: --schema's search_path applies
    return None if pooler() is not None else url
