"""What ``SELECT pgbeat_enqueue(...)`` (the enqueue of SQL, migration 0016) costs per job
beside ``pgbeat.enqueue``, in one run on one database and one connection.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test python -m bench.sql_enqueue

The two are interleaved in chunks, so the drift of commit (WAL flush) times hits both
alike, in two settings: one job per transaction (autocommit: what an application pays),
and many jobs in one transaction (no flush: the statement's own cost, the function's
checks included). Each job has a small payload, a priority and a tag. The ratio is the
SQL function's time per job over ``pgbeat.enqueue``'s; docs/sql-enqueue.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

import pgbeat
from bench import database, machine
from bench.keys_bench import _summary, _timed  # the same timing and summary as keys_bench's

CALL = "SELECT pgbeat_enqueue(%s, %s, priority => %s, tags => %s)"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def interleaved(
    conn: psycopg.Connection[Any], calls: int, chunk: int, in_transaction: bool
) -> dict[str, list[float]]:
    """Per-call seconds of each variant, chunk by chunk in turn."""
    variants: dict[str, Callable[[], Any]] = {
        "pgbeat.enqueue": lambda: pgbeat.enqueue(conn, "noop", {"n": 1}, priority=1, tags=["t"]),
        "SELECT pgbeat_enqueue": lambda: conn.execute(CALL, ("noop", Jsonb({"n": 1}), 1, ["t"])),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(0, calls, chunk):
        for name, call in variants.items():
            if in_transaction:
                with conn.transaction():
                    samples[name] += [_timed(call) for _ in range(chunk)]
            else:
                samples[name] += [_timed(call) for _ in range(chunk)]
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sql_enqueue", description=__doc__)
    parser.add_argument("--calls", type=int, default=5000, help="calls per variant and setting")
    parser.add_argument("--chunk", type=int, default=250, help="calls per variant in turn")
    args = parser.parse_args()
    admin = database.admin_url()
    results: dict[str, Any] = {"load_before": machine.load()}
    settings = (("one per transaction", False), ("one transaction", True))
    with (
        database.fresh_database(admin, "sql_enqueue") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        pgbeat.apply_migrations(conn)
        for setting, in_transaction in settings:
            log(setting)
            interleaved(conn, args.chunk, args.chunk, in_transaction)  # warm up, not kept
            samples = interleaved(conn, args.calls, args.chunk, in_transaction)
            summary: dict[str, Any] = {name: _summary(v) for name, v in samples.items()}
            summary["ratio (SQL time / Python time per job)"] = round(
                sum(samples["SELECT pgbeat_enqueue"]) / sum(samples["pgbeat.enqueue"]), 3
            )
            results[setting] = summary
    results["load_after"] = machine.load()
    results["server"] = database.server_facts(admin)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
