"""The worker's two sessions run in UTC whatever the server's or the URL's zone: claimed
rows' dates decode without a zone conversion, and an interval added on them (a retry's
delay, a rate's window) is elapsed time."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import psycopg

from pgbeat.db.connections import ReconnectBackoff
from pgbeat.worker.sessions import worker_session


def _with_zone(url: str, zone: str) -> str:
    params = psycopg.conninfo.conninfo_to_dict(url)
    params["options"] = f"{params.get('options') or ''} -c TimeZone={zone}".strip()
    return psycopg.conninfo.make_conninfo(**params)  # type: ignore[arg-type]


def test_a_worker_session_is_in_utc_even_when_the_url_asks_for_another_zone(
    database_url: str,
) -> None:
    berlin = _with_zone(database_url, "Europe/Berlin")
    with psycopg.connect(berlin, autocommit=True) as plain:
        assert str(plain.info.timezone) == "Europe/Berlin"  # the URL's zone does apply
    connector = worker_session(
        berlin, "pgbeat-test", ReconnectBackoff(berlin, logging.getLogger("test"))
    )
    try:
        conn = connector.get()
        assert conn.info.timezone == UTC
        row = conn.execute(
            "SELECT %s::timestamptz + %s::interval",
            (datetime(2026, 3, 28, 12, tzinfo=UTC), timedelta(days=1)),
        ).fetchone()
        assert row is not None
        # 24 hours across Berlin's change to summer time, not the 23 of a Berlin session
        assert row[0] == datetime(2026, 3, 29, 12, tzinfo=UTC)
        assert row[0].tzinfo is UTC
    finally:
        connector.close()
