"""``python -m bench.workflow_trigger_cpu``: what the workflow triggers cost plain jobs, in
server CPU rather than wall time (steadier on a small, shared machine).

On a fresh database, 20,000 plain jobs are claimed and completed by 400 ``UPDATE``s of 100
rows (the statements' shape: status, attempts, lease, finished_at), alternately with the
triggers of migration 0017 enabled and disabled; the backend's CPU seconds are read from
/proc (a local server). See docs/workflows.md, "Figures".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import psycopg

import pgbeat
from bench import database

SWITCH = {
    True: "ALTER TABLE jobs ENABLE TRIGGER jobs_workflow_advance;"
    " ALTER TABLE jobs ENABLE TRIGGER jobs_workflow_forget",
    False: "ALTER TABLE jobs DISABLE TRIGGER jobs_workflow_advance;"
    " ALTER TABLE jobs DISABLE TRIGGER jobs_workflow_forget",
}


def backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(conn: psycopg.Connection[Any], jobs: int) -> float:
    conn.execute("TRUNCATE jobs")
    ids = pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop") for _ in range(jobs)])
    conn.execute("VACUUM ANALYZE jobs")
    started = backend_cpu(conn.info.backend_pid)
    for at in range(0, jobs, 100):
        batch = ids[at : at + 100]
        conn.execute(
            "UPDATE jobs SET status = 'running', attempts = attempts + 1,"
            " locked_until = now() + interval '1 minute' WHERE id = ANY(%s)",
            [batch],
        )
        conn.execute(
            "UPDATE jobs SET status = 'done', finished_at = now(), locked_until = NULL"
            " WHERE id = ANY(%s)",
            [batch],
        )
    return backend_cpu(conn.info.backend_pid) - started


def set_triggers(conn: psycopg.Connection[Any], enabled: bool) -> None:
    conn.execute(SWITCH[enabled])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workflow_trigger_cpu")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args(argv)
    on: list[float] = []
    off: list[float] = []
    with (
        database.fresh_database(database.admin_url(), "wf_cpu") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        pgbeat.apply_migrations(conn)
        for _ in range(args.rounds):
            set_triggers(conn, False)
            off.append(one_round(conn, args.jobs))
            set_triggers(conn, True)
            on.append(one_round(conn, args.jobs))
    print(
        json.dumps(
            {
                "cpu_s_triggers_enabled": statistics.median(on),
                "cpu_s_triggers_disabled": statistics.median(off),
                "ratio": statistics.median(on) / statistics.median(off),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
