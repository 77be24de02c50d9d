"""What migration 0015's trigger on jobs.queue and jobs.limit_key costs an insert: 100,000
rows in one INSERT, with the trigger enabled and disabled in turn, in one run; prints the
paired ratios.

    python -m bench.name_trigger [--rows 100000] [--rounds 4]
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from bench.database import admin_url, fresh_database
from pgbeat.db.migrate import apply_migrations

INSERT = (
    "INSERT INTO jobs (kind, payload, queue, limit_key) "
    "SELECT 'k', '{}', 'default', 'key' || g FROM generate_series(1, %s) AS g"
)

ENABLE = "ALTER TABLE jobs ENABLE TRIGGER pgbeat_job_names"
DISABLE = "ALTER TABLE jobs DISABLE TRIGGER pgbeat_job_names"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    seconds: dict[bool, list[float]] = {True: [], False: []}
    with (
        fresh_database(admin_url(), "trigger") as url,
        psycopg.connect(url, autocommit=True) as conn,
    ):
        apply_migrations(conn)
        for enabled in [True, False] * args.rounds:
            state = "ENABLE" if enabled else "DISABLE"
            conn.execute(f"ALTER TABLE jobs {state} TRIGGER pgbeat_job_names")
            conn.execute("TRUNCATE jobs")
            started = time.monotonic()
            conn.execute(INSERT, (args.rows,))
            seconds[enabled].append(time.monotonic() - started)
    ratios = [on / off for on, off in zip(seconds[True], seconds[False], strict=True)]
    print(f"seconds with the trigger {[round(s, 3) for s in seconds[True]]}")
    print(f"seconds without          {[round(s, 3) for s in seconds[False]]}")
    print(f"paired ratios {[round(r, 2) for r in ratios]}, median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
