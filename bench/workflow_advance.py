"""``python -m bench.workflow_advance``: a step's start after its last parent's end (issue
36, item 2), on a direct connection and behind pgbouncer, in one run.

Each sample is a diamond (a -> b, c -> d) enqueued on an idle in-process Worker (10
slots); the figure is d's handler start (the worker's wall clock) minus the later of b's
and c's ``finished_at`` (the database's ``now()`` in the statement that ended it, which
commits after: so an upper bound of commit-to-start). Worker and server share one machine
and one clock. Configurations, alternated round by round:

- ``direct``: the worker LISTENs (the advance's NOTIFY wakes it);
- ``pgbouncer, LISTEN direct``: every statement through a pgbouncer of the bench's own in
  transaction pooling (tests/pgbouncer.py), ``PGBEAT_LISTEN_URL`` a direct connection;
- ``pgbouncer, poll``: through pgbouncer, no LISTEN, polling at ``--poll`` seconds (the
  worker's default 1 s): the contract's "within one poll".

    python -m bench.workflow_advance [--samples 50] [--rounds 2] [--poll 1.0]
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from tests.pgbouncer import Pgbouncer

import pgbeat
from bench import database, machine
from bench.measure import percentile
from pgbeat.db.pooler import LISTEN_URL_ENV, POOLER_ENV

# d's parents' latest end, by d's job id.
PARENTS_ENDED = """
SELECT e.child_id, extract(epoch FROM max(p.finished_at))
FROM pgbeat_workflow_edges AS e JOIN jobs AS p ON p.id = e.parent_id
WHERE e.child_id = ANY(%s) GROUP BY e.child_id"""


@contextmanager
def environment(**values: str | None) -> Iterator[None]:
    """``os.environ`` with ``values`` set (None: unset) for the block: pgbeat reads the
    pooler settings from it at each connect."""
    saved = {name: os.environ.get(name) for name in values}
    for name, value in values.items():
        os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)


def diamond(i: int) -> pgbeat.Workflow:
    flow = pgbeat.Workflow(f"diamond-{i}")
    a = flow.add("step", name="a")
    flow.add(
        "join", {"i": i}, name="d", after=[flow.add("step", after=a), flow.add("step", after=a)]
    )
    return flow


def samples(url: str, direct_url: str, count: int, poll: float) -> list[float]:
    """Seconds from d's parents' end to d's start, ``count`` diamonds one at a time."""
    started: dict[int, float] = {}
    arrived = threading.Condition()
    registry = pgbeat.Registry()

    @registry.handler("step")
    def step(payload: Any) -> None:
        """A parent: ends at once."""

    @registry.handler("join")
    def join(payload: Any, job: pgbeat.JobContext) -> None:
        with arrived:
            started[job.id] = time.time()
            arrived.notify_all()

    settings = pgbeat.WorkerSettings(
        concurrency=10, poll_interval=timedelta(seconds=poll), heartbeat=False
    )
    worker = pgbeat.Worker(url, registry, settings)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    joins: list[int] = []
    try:
        with psycopg.connect(direct_url, autocommit=True) as conn:
            for i in range(-2, count):  # two warm-ups: connections, plans
                joined = pgbeat.enqueue_workflow(conn, diamond(i)).jobs["d"]
                with arrived:
                    if not arrived.wait_for(partial(operator.contains, started, joined), 30):
                        raise RuntimeError(f"diamond {i}'s join did not start within 30 s")
                if i >= 0:
                    joins.append(joined)
                time.sleep(0.05)
            ended: dict[int, Any] = dict(conn.execute(PARENTS_ENDED, [joins]).fetchall())
    finally:
        worker.stop()
        thread.join(30)
    return [max(0.0, started[j] - float(ended[j])) for j in joins]


def summary(values: list[float]) -> dict[str, float | int]:
    millis = sorted(1000 * v for v in values)
    return {
        "samples": len(millis),
        "p50_ms": round(percentile(millis, 50), 1),
        "p99_ms": round(percentile(millis, 99), 1),
        "max_ms": round(millis[-1], 1),
        "mean_ms": round(statistics.fmean(millis), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workflow_advance", description=__doc__)
    parser.add_argument("--samples", type=int, default=50, help="diamonds per round (50)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every config (2)")
    parser.add_argument("--poll", type=float, default=1.0, help="the polling config's (1.0 s)")
    args = parser.parse_args(argv)
    admin = database.admin_url()
    report: dict[str, Any] = {
        "command": ["python", "-m", "bench.workflow_advance", *sys.argv[1:]],
        "revision": machine.source_revision(Path(__file__).resolve().parents[1]),
        "load_average_1m_at_start": machine.load(),
    }
    found: dict[str, list[float]] = {}
    with database.fresh_database(admin, "wf_advance") as url:
        with psycopg.connect(url, autocommit=True) as conn:
            pgbeat.apply_migrations(conn)
        bouncer = Pgbouncer(admin, pool_size=20)
        pooled = bouncer.url(url)
        configs = (
            ("direct", url, {POOLER_ENV: None, LISTEN_URL_ENV: None}, 1.0),
            (
                "pgbouncer, LISTEN direct",
                pooled,
                {POOLER_ENV: "transaction", LISTEN_URL_ENV: url},
                1.0,
            ),
            (
                "pgbouncer, poll",
                pooled,
                {POOLER_ENV: "transaction", LISTEN_URL_ENV: None},
                args.poll,
            ),
        )
        try:
            for turn in range(args.rounds):
                for name, target, env, poll in configs if turn % 2 == 0 else configs[::-1]:
                    print(f"round {turn + 1}: {name}", file=sys.stderr, flush=True)
                    with environment(**env):
                        found.setdefault(name, []).extend(samples(target, url, args.samples, poll))
        finally:
            bouncer.close()
    report["poll_s"] = args.poll
    report["advance"] = {name: summary(values) for name, values in found.items()}
    report["load_average_1m_at_end"] = machine.load()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
