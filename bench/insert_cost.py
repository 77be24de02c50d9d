"""``python -m bench.insert_cost``: what each object on ``jobs`` costs an insert of plain jobs.

Two databases on one PostgreSQL: one migrated by another revision (``--base-src``, e.g. a
worktree of the revision before), one by this one. The indexes and triggers on ``jobs``
that this revision added are found by name, and a twin of this revision's database is
made without each of them in turn (and without all), plus any ``--variant`` given. Every
database then runs the same statement (plain jobs: kind, payload and the defaults, the
rows ``enqueue_many`` writes for ``NewJob("noop", {})``), alternated round by round in
reversed order every other round, so drift of the machine hits every variant alike.

Per variant: WAL records, WAL bytes and shared buffers per row (from ``EXPLAIN (ANALYZE,
BUFFERS, WAL)``, the same on any machine), and the backend's CPU per row (from
``/proc/PID/schedstat`` when the server is local, else wall time), with its median ratio
to the base paired round by round. See docs/benchmarks.md, "What an insert pays".

    python -m bench.insert_cost --base-src ../base922/src [--rows 1000] [--statements 20]
        [--rounds 20] [--variant 'name:SQL;SQL']
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

import pgbeat
from bench import database, machine

REPO_ROOT = Path(__file__).resolve().parents[1]

# Plain jobs as enqueue_many writes them (its columns are both revisions'), from arrays.
INSERT = """
INSERT INTO jobs (kind, payload, run_at, max_attempts, queue, priority)
SELECT kind, payload, now(), 8, 'default', 0
FROM unnest(%(kinds)s::text[], %(payloads)s::jsonb[]) AS new_job(kind, payload)"""

# The indexes and the enabled user triggers on jobs, by name.
OBJECTS = """
SELECT 'index', indexrelid::regclass::text FROM pg_index WHERE indrelid = 'jobs'::regclass
UNION ALL
SELECT 'trigger', tgname FROM pg_trigger
WHERE tgrelid = 'jobs'::regclass AND NOT tgisinternal AND tgenabled <> 'D'"""


def migrate_with(src: Path, url: str) -> None:
    """Migrate ``url`` with the pgbeat of ``src`` (a child process importing it first)."""
    code = "import sys, psycopg, pgbeat; pgbeat.apply_migrations(psycopg.connect(sys.argv[1]))"
    env = machine.revision_env(src)
    subprocess.run([sys.executable, "-c", code, url], env=env, check=True, timeout=300)


def objects(url: str) -> set[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return {(str(kind), str(name)) for kind, name in conn.execute(OBJECTS).fetchall()}


def without(kind: str, name: str) -> str:
    """The statement that takes one object's cost away from an insert."""
    if kind == "index":
        return f"DROP INDEX {name}"
    return f"ALTER TABLE jobs DISABLE TRIGGER {name}"


def backend_seconds(conn: psycopg.Connection[Any], local: bool) -> float:
    """The backend's CPU time so far (schedstat, nanoseconds), or the wall clock."""
    if not local:
        return time.perf_counter()
    path = Path(f"/proc/{conn.info.backend_pid}/schedstat")
    return int(path.read_text().split()[0]) / 1e9


def explain_per_row(
    conn: psycopg.Connection[Any], params: dict[str, Any], rows: int
) -> dict[str, float]:
    """WAL records, WAL bytes and shared buffers (hit + read) per inserted row."""
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON)" + INSERT, params).fetchone()
    assert plan is not None
    top = plan[0][0]["Plan"]
    return {
        "wal_records": round(top["WAL Records"] / rows, 2),
        "wal_bytes": round(top["WAL Bytes"] / rows, 1),
        "buffers": round((top["Shared Hit Blocks"] + top["Shared Read Blocks"]) / rows, 2),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    admin = database.admin_url()
    local = Path("/proc/self/schedstat").exists() and _is_local(admin)
    rows = args.rows
    params = {"kinds": ["noop"] * rows, "payloads": ["{}"] * rows}
    with (
        database.fresh_database(admin, "ins_base") as base_url,
        database.fresh_database(admin, "ins_this") as this_url,
    ):
        migrate_with(args.base_src, base_url)
        with psycopg.connect(this_url, autocommit=True) as conn:
            pgbeat.apply_migrations(conn)
        added = sorted(objects(this_url) - objects(base_url))
        variants: dict[str, list[str]] = {"base": [], "this": []}
        for kind, name in added if not args.given_only else []:
            variants[f"this without {name}"] = [without(kind, name)]
        if len(added) > 1 and not args.given_only:
            variants["this without all of them"] = [without(k, n) for k, n in added]
        for given in args.variant:
            name, _, statements = given.partition(":")
            variants[f"this with {name}"] = [s for s in statements.split(";") if s.strip()]
        twins = {name: f"ins_{i}_{os.getpid()}" for i, name in enumerate(variants) if i > 1}
        urls = {"base": base_url, "this": this_url}
        with psycopg.connect(admin, autocommit=True) as conn:
            for name, db in twins.items():
                template = sql.Identifier(str(conninfo_to_dict(this_url)["dbname"]))
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(db), template)
                )
                urls[name] = database.with_database(admin, db)
        try:
            return run_rounds(args, urls, variants, params, local, added)
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                for db in twins.values():
                    conn.execute(
                        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                            sql.Identifier(db)
                        )
                    )


def run_rounds(
    args: argparse.Namespace,
    urls: dict[str, str],
    variants: dict[str, list[str]],
    params: dict[str, Any],
    local: bool,
    added: list[tuple[str, str]],
) -> dict[str, Any]:
    conns = {name: psycopg.connect(url, autocommit=True) for name, url in urls.items()}
    try:
        for name, statements in variants.items():
            for statement in statements:
                conns[name].execute(statement.encode())
            conns[name].execute("TRUNCATE jobs")
            conns[name].execute(INSERT, params, prepare=True)  # warm: plan, catalog, cache
        per_row = {name: explain_per_row(conns[name], params, args.rows) for name in conns}
        seconds: dict[str, list[float]] = {name: [] for name in conns}
        names = list(conns)
        for turn in range(args.rounds):
            for name in names if turn % 2 == 0 else names[::-1]:
                conn = conns[name]
                conn.execute("TRUNCATE jobs")
                started = backend_seconds(conn, local)
                for _ in range(args.statements):
                    conn.execute(INSERT, params, prepare=True)
                seconds[name].append(backend_seconds(conn, local) - started)
    finally:
        for conn in conns.values():
            conn.close()
    inserted = args.rows * args.statements
    table = {}
    for name in names:
        paired = [t / b for t, b in zip(seconds[name], seconds["base"], strict=True)]
        table[name] = {
            **per_row[name],
            "us_per_row": round(statistics.median(seconds[name]) / inserted * 1e6, 2),
            "ratio_to_base_paired_median": round(statistics.median(paired), 3),
        }
    return {
        "added_since_base": [f"{kind} {name}" for kind, name in added],
        "clock": "backend CPU (schedstat)" if local else "wall",
        "rows_per_statement": args.rows,
        "statements_per_round": args.statements,
        "rounds": args.rounds,
        "variants": table,
    }


def _is_local(url: str) -> bool:
    host = conninfo_to_dict(url).get("host") or ""
    return all(
        not h or h.startswith("/") or h in ("localhost", "127.0.0.1", "::1")
        for h in str(host).split(",")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.insert_cost", description=__doc__)
    parser.add_argument("--base-src", type=Path, required=True, help="the other revision's src/")
    parser.add_argument("--rows", type=int, default=1000, help="rows per statement (1,000)")
    parser.add_argument("--statements", type=int, default=20, help="statements per round (20)")
    parser.add_argument("--rounds", type=int, default=20, help="alternated rounds (20)")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME:SQL[;SQL...] run on a twin of this revision's database (repeatable)",
    )
    parser.add_argument(
        "--given-only", action="store_true", help="the base, this and the --variant twins only"
    )
    args = parser.parse_args(argv)
    report = {
        "command": ["python", "-m", "bench.insert_cost", *sys.argv[1:]],
        "revision": machine.source_revision(REPO_ROOT),
        "load_average_1m_at_start": machine.load(),
        **measure(args),
        "load_average_1m_at_end": machine.load(),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
