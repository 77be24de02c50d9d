"""`pgbeat queues list`'s pages and the overview's oldest queues, against a real database:
every queue listed once across keyset pages (settings-only, pending-only and running-only
queues alike), a name filter whose search stops after a bounded walk and goes on from
there, and the queues of the oldest due jobs, which never count a held workflow step."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.jobs import queues
from tests.helpers import run_cli

# Queue names and where their row comes from: settings only, pending jobs, a running job.
SETTINGS_ONLY = [f"conf-{i:02d}" for i in range(7)]
PENDING = [f"tenant-{i:03d}" for i in range(40)]
RUNNING_ONLY = ["busy-a", "busy-b"]
EVERY = sorted(SETTINGS_ONLY + PENDING + RUNNING_ONLY)


def plant(conn: psycopg.Connection[Any]) -> None:
    for name in SETTINGS_ONLY:
        pgbeat.configure_queue(conn, name, concurrency=3)
    pgbeat.enqueue_many(
        conn,
        [pgbeat.NewJob("noop", queue=name) for name in PENDING for _ in range(2)]
        + [pgbeat.NewJob("noop", queue=name) for name in RUNNING_ONLY],
    )
    conn.execute(
        "UPDATE jobs SET status = 'running', locked_until = now() + interval '1 hour'"
        " WHERE queue = ANY(%s)",
        (RUNNING_ONLY,),
    )


def every_page(conn: psycopg.Connection[Any], **options: Any) -> list[list[str]]:
    """The names of each page, following next_after to the end (at most 100 pages)."""
    pages: list[list[str]] = []
    after = None
    for _ in range(100):
        page = queues.list_queues(conn, after=after, **options)
        pages.append([state.settings.name for state in page.queues])
        if page.next_after is None:
            return pages
        after = page.next_after
    raise AssertionError("the pages never ended")


@pytest.mark.parametrize("span", [1, 25, 1000])  # 1: as the page's size
def test_keyset_pages_list_every_queue_once_in_name_order(
    conn: psycopg.Connection[Any], span: int
) -> None:
    plant(conn)
    pages = every_page(conn, limit=10, span=span)
    assert [name for page in pages for name in page] == EVERY
    assert all(len(page) == 10 for page in pages[:-1])


@pytest.mark.parametrize("span", [2, 5, 1000])
def test_a_filter_finds_every_match_across_its_bounded_searches(
    conn: psycopg.Connection[Any], span: int
) -> None:
    plant(conn)
    for text, limit in (("3", 4), ("B", 50), ("ZZZ", 10)):
        pages = every_page(conn, name=text, limit=limit, span=span)
        expected = [name for name in EVERY if text.lower() in name.lower()]
        assert [name for page in pages for name in page] == expected


def test_a_search_that_stops_short_says_where_and_the_next_goes_on(
    conn: psycopg.Connection[Any],
) -> None:
    plant(conn)
    first = queues.list_queues(conn, name="tenant-039", limit=5, span=5)
    assert first.queues == [] and first.searched_to == "tenant-004"
    assert first.next_after == "tenant-004"
    assert [s.settings.name for s in queues.list_queues(conn, name="tenant-039").queues] == [
        "tenant-039"
    ]
    last = queues.list_queues(conn, name="tenant-039", after="tenant-035", limit=5, span=5)
    assert [s.settings.name for s in last.queues] == ["tenant-039"]
    assert last.next_after is None and last.searched_to is None


def test_counts_and_settings_of_a_page(conn: psycopg.Connection[Any]) -> None:
    plant(conn)
    page = queues.list_queues(conn, name="busy-a")
    [state] = page.queues
    assert (state.pending, state.running, state.settings.concurrency) == (0, 1, None)
    [conf] = queues.list_queues(conn, name="conf-03").queues
    assert (conf.pending, conf.running, conf.settings.concurrency) == (0, 0, 3)
    assert queues.list_queues(conn, name="nothing matches").queues == []


def test_the_cli_prints_one_json_array_and_says_where_more_starts(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    plant(conn)
    listed = run_cli(["queues", "list", "--json", "--name", "TENANT", "--limit", "5"], database_url)
    assert listed.returncode == 0, listed.stderr
    assert [row["name"] for row in json.loads(listed.stdout)] == PENDING[:5]
    assert listed.stderr.strip() == "more: --after tenant-004"
    table = run_cli(["queues", "list", "--after", "tenant-037"], database_url)
    assert table.returncode == 0, table.stderr
    assert "tenant-038" in table.stdout and "tenant-036" not in table.stdout
    assert "more:" not in table.stdout
    nothing = run_cli(["queues", "list", "--name", "zzz"], database_url)
    assert nothing.returncode == 0 and "no queues" in nothing.stdout


def test_the_oldest_due_queues_are_named_oldest_first(conn: psycopg.Connection[Any]) -> None:
    for queue, minutes in (("c", 30), ("a", 50), ("b", 40), ("a", 45), ("d", 10), ("e", 5)):
        conn.execute(
            "INSERT INTO jobs (kind, payload, queue, run_at)"
            " VALUES ('noop', '{}', %s, now() - %s * interval '1 minute')",
            (queue, minutes),
        )
    pgbeat.enqueue(conn, "noop", queue="later", delay=timedelta(hours=1))
    flow = pgbeat.Workflow("held")
    flow.add("noop", after=[flow.add("noop", queue="wf-root")], queue="wf-held")
    pgbeat.enqueue_workflow(conn, flow)  # wf-held's step waits for its parent: not due
    pgbeat.pause_queue(conn, "b")
    named = queues.oldest_due_queues(conn, limit=4)
    assert [q.name for q in named] == ["a", "b", "c", "d"]
    assert [q.paused for q in named] == [False, True, False, False]
    assert named[0].waits_s is not None and 50 * 60 <= named[0].waits_s < 51 * 60
    every = [q.name for q in queues.oldest_due_queues(conn, limit=10)]
    assert every == ["a", "b", "c", "d", "e", "wf-root"]  # never "later" nor "wf-held"
    # Read among the 2 oldest due jobs only: both are a's, so a alone is named.
    assert [q.name for q in queues.oldest_due_queues(conn, limit=4, scan=2)] == ["a"]
