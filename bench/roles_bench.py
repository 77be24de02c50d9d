"""``python -m bench.roles_bench``: what docs/least-privilege.sql costs (row-level security
and the status guard on jobs), measured as the owner and as each role in one run.

Enqueue (``enqueue_many``) as the owner and as a ``pgbeat_enqueue`` login, claim and complete
as the owner and as a ``pgbeat_worker`` login, alternating, on one fresh database. Prints the
median of each and the role/owner ratio.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

import pgbeat
from bench import database
from pgbeat.db.migrate import apply_migrations
from pgbeat.worker import operations

GRANTS = (Path(__file__).resolve().parents[1] / "docs" / "least-privilege.sql").read_text()
GROUP_NAME = re.compile(r"\bpgbeat_(enqueue|keys|worker|scheduler|ui_viewer|ui_admin|admin)\b")
GROUPS = ("enqueue", "keys", "worker", "scheduler", "ui_viewer", "ui_admin", "admin")


def _as(url: str, role: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=f"{role}@{host}"))


def _enqueue(url: str, jobs: int) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("noop", {"n": i}) for i in range(jobs)])
        return time.perf_counter() - started


def _drain(url: str, batch: int) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        while jobs := operations.claim_jobs(conn, batch, timedelta(minutes=5), None):
            operations.complete_jobs(conn, jobs)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    admin = database.admin_url()
    suffix = uuid.uuid4().hex[:6]
    logins = {group: f"bench_{group}_{suffix}" for group in ("enqueue", "worker")}
    with database.fresh_database(admin, "roles") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            apply_migrations(conn)
            # the run's own group roles, so that the server's real ones are never touched
            conn.execute(GROUP_NAME.sub(lambda m: f"{m.group(0)}_{suffix}", GRANTS).encode())
            for group, login in logins.items():
                conn.execute(
                    sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                        sql.Identifier(login), sql.Identifier(f"pgbeat_{group}_{suffix}")
                    )
                )
        try:
            times: dict[str, list[float]] = {}
            for rep in range(args.repeat):
                order = [("owner", url), ("role", _as(url, logins["enqueue"]))]
                for who, target in order if rep % 2 == 0 else order[::-1]:  # no order bias
                    times.setdefault(f"enqueue_many as {who}", []).append(
                        _enqueue(target, args.jobs)
                    )
                    drainer = url if who == "owner" else _as(url, logins["worker"])
                    times.setdefault(f"claim+complete as {who}", []).append(
                        _drain(drainer, args.batch)
                    )
            _report(times, args.jobs)
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                for login in logins.values():
                    conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(login)))
    with psycopg.connect(admin, autocommit=True) as conn:  # their database is gone: so are they
        for group in GROUPS:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(f"pgbeat_{group}_{suffix}")))


def _report(times: dict[str, list[float]], jobs: int) -> None:
    medians: dict[str, Any] = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in medians.items():
        print(f"{name:28s} {jobs / seconds:10,.0f} jobs/s")
    for phase in ("enqueue_many", "claim+complete"):
        ratio = medians[f"{phase} as owner"] / medians[f"{phase} as role"]
        print(f"{phase}: role/owner throughput {ratio:.2f}")


if __name__ == "__main__":
    main()
