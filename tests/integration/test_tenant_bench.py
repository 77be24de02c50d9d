"""bench.tenant_bench's drains: a worker process that dies fails the drain at once."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from bench import tenant_bench

import pgbeat


def test_a_drain_whose_worker_dies_fails_at_once(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's loop raises in the forked process: the drain ends with an error within
    seconds, not at its deadline."""

    def broken(self: Any) -> None:
        raise RuntimeError("a broken worker loop")

    with psycopg.connect(database_url, autocommit=True) as conn:
        pgbeat.apply_migrations(conn)
    monkeypatch.setattr(pgbeat.Worker, "run", broken)  # inherited by the forked children
    began = time.monotonic()
    with pytest.raises(RuntimeError, match="ended before it"):
        tenant_bench.child_drain(database_url, 100, 1, max_seconds=60)
    assert time.monotonic() - began < 30
