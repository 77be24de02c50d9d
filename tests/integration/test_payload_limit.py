"""A payload larger than the limit (1 MiB of JSON, or PGBEAT_MAX_PAYLOAD_BYTES) is refused
in one clear line, by the API and the CLI, and nothing is inserted."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.jobs.enqueue import DEFAULT_MAX_PAYLOAD_BYTES
from tests.helpers import run_cli


def payload_of(size: int) -> dict[str, str]:
    """A payload whose JSON text is exactly ``size`` bytes."""
    payload = {"data": "x" * (size - len('{"data": ""}'))}
    assert len(json.dumps(payload)) == size
    return payload


def count(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_the_api_takes_the_limit_and_refuses_a_byte_more(conn: psycopg.Connection[Any]) -> None:
    assert DEFAULT_MAX_PAYLOAD_BYTES == 1024 * 1024
    job_id = pgbeat.enqueue(conn, "big", payload_of(DEFAULT_MAX_PAYLOAD_BYTES))
    stored = conn.execute("SELECT payload FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert stored is not None and stored[0] == payload_of(DEFAULT_MAX_PAYLOAD_BYTES)

    too_big = payload_of(DEFAULT_MAX_PAYLOAD_BYTES + 1)
    with pytest.raises(ValueError, match=r"1048577 bytes .* limit of 1048576") as refused:
        pgbeat.enqueue(conn, "big", too_big)
    assert "\n" not in str(refused.value) and "PGBEAT_MAX_PAYLOAD_BYTES" in str(refused.value)
    with pytest.raises(ValueError, match="limit"):  # one bad job refuses the whole batch
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("small", {}), pgbeat.NewJob("big", too_big)])
    with pytest.raises(ValueError, match="limit"):
        pgbeat.enqueue(conn, "big", too_big, job_key="k1")
    assert count(conn) == 1


def test_async_enqueue_is_held_to_the_same_limit(database_url: str) -> None:
    async def enqueue_too_big() -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
            await pgbeat.enqueue_async(aconn, "big", payload_of(DEFAULT_MAX_PAYLOAD_BYTES + 1))

    with pytest.raises(ValueError, match="limit"):
        asyncio.run(enqueue_too_big())


def test_the_limit_is_configurable(
    conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGBEAT_MAX_PAYLOAD_BYTES", "100")
    pgbeat.enqueue(conn, "small", payload_of(100))
    with pytest.raises(ValueError, match=r"101 bytes .* limit of 100"):
        pgbeat.enqueue(conn, "small", payload_of(101))
    monkeypatch.setenv("PGBEAT_MAX_PAYLOAD_BYTES", "a lot")
    with pytest.raises(ValueError, match="PGBEAT_MAX_PAYLOAD_BYTES must be a whole number"):
        pgbeat.enqueue(conn, "small", {})
    assert count(conn) == 1


@pytest.mark.slow
def test_the_cli_refuses_in_one_line(database_url: str, conn: psycopg.Connection[Any]) -> None:
    # A command-line argument holds at most 128 KiB on Linux: a lower limit shows the CLI's path.
    limit = "1000"
    fits = run_cli(
        ["enqueue", "k", "--payload", json.dumps(payload_of(1000))],
        database_url,
        PGBEAT_MAX_PAYLOAD_BYTES=limit,
    )
    assert fits.returncode == 0, fits.stderr
    big = run_cli(
        ["enqueue", "k", "--payload", json.dumps(payload_of(1001))],
        database_url,
        PGBEAT_MAX_PAYLOAD_BYTES=limit,
    )
    assert big.returncode == 1
    assert big.stderr.count("\n") == 1 and "Traceback" not in big.stderr
    assert "1001 bytes" in big.stderr and "PGBEAT_MAX_PAYLOAD_BYTES" in big.stderr
    assert count(conn) == 1
