"""What ``SELECT pgbeat_enqueue(...)`` (the enqueue of SQL, migration 0016) costs per job
beside ``pgbeat.enqueue``, in one run on one database and one connection.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test python -m bench.sql_enqueue
        [--base-src DIR]

With ``--base-src`` (another revision's src/), a second database is migrated by that
revision and its ``SELECT pgbeat_enqueue`` joins the interleaving on a connection of its
own: the ratio of this revision's function to that one's.

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
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

import pgbeat
from bench import database, machine
from bench.insert_cost import migrate_with
from bench.keys_bench import _summary, _timed  # the same timing and summary as keys_bench's

CALL = "SELECT pgbeat_enqueue(%s, %s, priority => %s, tags => %s)"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


BASE = "SELECT pgbeat_enqueue (base)"


def interleaved(
    conns: list[psycopg.Connection[Any]], calls: int, chunk: int, in_transaction: bool
) -> dict[str, list[float]]:
    """Per-call seconds of each variant, chunk by chunk in turn (the base's on a second
    connection, when there is one)."""
    conn = conns[0]
    args = ("noop", Jsonb({"n": 1}), 1, ["t"])
    variants: dict[str, tuple[psycopg.Connection[Any], Callable[[], Any]]] = {
        "pgbeat.enqueue": (
            conn,
            lambda: pgbeat.enqueue(conn, "noop", {"n": 1}, priority=1, tags=["t"]),
        ),
        "SELECT pgbeat_enqueue": (conn, lambda: conn.execute(CALL, args)),
    }
    if len(conns) > 1:
        variants[BASE] = (conns[1], lambda: conns[1].execute(CALL, args))
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(0, calls, chunk):
        for name, (on, call) in variants.items():
            if in_transaction:
                with on.transaction():
                    samples[name] += [_timed(call) for _ in range(chunk)]
            else:
                samples[name] += [_timed(call) for _ in range(chunk)]
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sql_enqueue", description=__doc__)
    parser.add_argument("--calls", type=int, default=5000, help="calls per variant and setting")
    parser.add_argument("--chunk", type=int, default=250, help="calls per variant in turn")
    parser.add_argument("--base-src", type=Path, help="another revision's src/, to compare")
    args = parser.parse_args()
    admin = database.admin_url()
    results: dict[str, Any] = {"load_before": machine.load()}
    settings = (("one per transaction", False), ("one transaction", True))
    with (
        database.fresh_database(admin, "sql_enqueue") as url,
        database.fresh_database(admin, "sql_enqueue_base") as base_url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        pgbeat.apply_migrations(conn)
        conns = [conn]
        if args.base_src:
            migrate_with(args.base_src, base_url)
            conns.append(psycopg.connect(base_url, autocommit=True))
        for setting, in_transaction in settings:
            log(setting)
            interleaved(conns, args.chunk, args.chunk, in_transaction)  # warm up, not kept
            samples = interleaved(conns, args.calls, args.chunk, in_transaction)
            summary: dict[str, Any] = {name: _summary(v) for name, v in samples.items()}
            sql_time = sum(samples["SELECT pgbeat_enqueue"])
            summary["ratio (SQL time / Python time per job)"] = round(
                sql_time / sum(samples["pgbeat.enqueue"]), 3
            )
            if BASE in samples:
                summary["ratio (SQL time / the base's SQL time)"] = round(
                    sql_time / sum(samples[BASE]), 3
                )
            results[setting] = summary
        for other in conns[1:]:
            other.close()
    results["load_after"] = machine.load()
    results["server"] = database.server_facts(admin)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
