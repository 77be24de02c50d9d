"""Tags (migration 0016): on every way a job is enqueued, refused in one line past their
limits, in a handler's JobContext, and found through the jobs_tags index by
`pgbeat jobs list --tag` and the dashboard's filter, shown escaped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

import pgbeat
from pgbeat.db.sql.jobs import actions as action_sql
from pgbeat.db.sql.jobs import dashboard as dashboard_sql
from pgbeat.errors import ConfigError
from pgbeat.jobs import reads
from pgbeat.scheduling.file import build_schedule
from pgbeat.scheduling.state import run_schedule_now
from pgbeat.testing import drain
from pgbeat.ui.filters import JobFilter
from tests.helpers import plan_nodes, run_cli_here, schedules_toml
from tests.integration.ui_support import dashboard, sync_schedules

HOSTILE_TAG = "<script>alert(1)</script>&\"'"


def tags_of(conn: psycopg.Connection[Any]) -> dict[int, Any]:
    return dict(conn.execute("SELECT id, tags FROM jobs ORDER BY id").fetchall())


def test_every_enqueue_path_stores_tags(conn: psycopg.Connection[Any]) -> None:
    plain = pgbeat.enqueue(conn, "k", tags=["tenant:42", "billing"])
    keyed = pgbeat.enqueue(conn, "k", job_key="a", tags=["keyed"])
    many = pgbeat.enqueue_many(
        conn,
        [
            pgbeat.NewJob("k", tags=["m", 'quote"and\\back']),
            pgbeat.NewJob("k"),
            pgbeat.NewJob("k", job_key="b", tags=("t",)),
        ],
    )
    untagged = pgbeat.enqueue(conn, "k", tags=[])
    replaced = pgbeat.enqueue(conn, "k", job_key="a", on_conflict="replace", tags=["new"])
    assert replaced == keyed
    assert plain is not None and keyed is not None and untagged is not None
    stored = tags_of(conn)
    assert stored[plain] == ["tenant:42", "billing"]
    assert stored[keyed] == ["new"]
    assert [stored[i] for i in many] == [["m", 'quote"and\\back'], None, ["t"]]
    assert stored[untagged] is None


@pytest.mark.parametrize(
    ("tags", "error"),
    [
        (["t"] * 21, "at most 20"),
        (["x" * 101], "at most 100"),
        ([""], "non-empty"),
        ("ab", "list of strings"),
        ([3], "non-empty string"),
        (["a\x00"], "NUL"),
    ],
)
def test_limits_are_refused_before_any_sql(
    conn: psycopg.Connection[Any], tags: Any, error: str
) -> None:
    with pytest.raises((ValueError, TypeError), match=error):
        pgbeat.enqueue(conn, "k", tags=tags)
    with pytest.raises((ValueError, TypeError), match=error):
        pgbeat.enqueue_many(conn, [pgbeat.NewJob("k", tags=tags)])
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_a_handler_reads_its_tags(conn: psycopg.Connection[Any]) -> None:
    seen: list[tuple[str, ...]] = []
    registry = pgbeat.Registry()

    @registry.handler("tagged")
    def tagged(payload: Any, job: pgbeat.JobContext) -> None:
        seen.append(job.tags)

    pgbeat.enqueue(conn, "tagged", tags=["a", "b"])
    pgbeat.enqueue(conn, "tagged")
    assert drain(conn, registry) == {"done": 2}
    assert sorted(seen) == [(), ("a", "b")]


def test_the_cli_enqueues_and_lists_by_tag(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    made = run_cli_here(["enqueue", "k", "--tag", "a", "--tag", "b"], database_url)
    assert made.returncode == 0, made.stderr
    run_cli_here(["enqueue", "k", "--tag", "c"], database_url)
    listed = run_cli_here(["jobs", "list", "--tag", "a", "--json"], database_url)
    rows = json.loads(listed.stdout)
    assert [(row["id"], row["tags"]) for row in rows] == [(int(made.stdout), ["a", "b"])]
    text = run_cli_here(["jobs", "list", "--tag", "b"], database_url)
    assert "[a, b]" in text.stdout
    refused = run_cli_here(["enqueue", "k", "--tag", "x" * 101], database_url)
    assert refused.returncode == 1
    assert len(refused.stderr.strip().splitlines()) == 1 and "at most 100" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_list_jobs_finds_a_tag_among_many(conn: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue_many(
        conn, [pgbeat.NewJob("bulk", tags=[f"tenant:{n % 5000}"]) for n in range(20_000)]
    )
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("bulk") for _ in range(20_000)])
    conn.execute("ANALYZE jobs")
    assert len(reads.list_jobs(conn, status=None, kind=None, limit=50, tag="tenant:7")) == 4


def test_the_index_serves_the_list_statements(conn: psycopg.Connection[Any]) -> None:
    pgbeat.enqueue_many(conn, [pgbeat.NewJob("bulk", tags=[f"t{n}"]) for n in range(20_000)])
    conn.execute("ANALYZE jobs")
    cli_params = {"status": None, "kind": None, "limit": 50, "tag": "t7"}
    ui_params = {**JobFilter(tag="t7").params(), "before": None, "limit": 50}
    statements: list[tuple[psycopg.sql.Composable, dict[str, Any]]] = [
        (psycopg.sql.SQL(action_sql.JOBS_LIST), cli_params),
        (dashboard_sql.JOBS_PAGE, ui_params),
    ]
    for statement, params in statements:
        explain = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) {}").format(statement)
        plan = conn.execute(explain, params).fetchone()
        assert plan is not None
        indexes = {node.get("Index Name") for node in plan_nodes(plan[0][0]["Plan"])}
        assert "jobs_tags" in indexes, plan


def test_the_dashboard_filters_by_tag_and_escapes_it(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        tagged = pgbeat.enqueue(conn, "k", tags=[HOSTILE_TAG, "plain"])
        other = pgbeat.enqueue(conn, "k", tags=["else"])
    with dashboard(database_url) as ui, httpx.Client(base_url=ui.origin, timeout=30) as client:
        page = client.get("/jobs", params={"tag": "plain"})
        assert page.status_code == 200
        assert f'id="job-{tagged}"' in page.text and f'id="job-{other}"' not in page.text
        assert "<script>alert(1)" not in page.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        detail = client.get(f"/jobs/{tagged}")
        assert detail.status_code == 200
        assert "<script>alert(1)" not in detail.text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in detail.text
        assert "tag=plain" in detail.text


def test_a_schedules_tags_go_to_its_jobs(conn: psycopg.Connection[Any], tmp_path: Path) -> None:
    assert pgbeat.upsert_schedule(conn, "coded", every="1m", kind="tick", tags=["a", "b"])
    plain = pgbeat.upsert_schedule(conn, "plain", every="1m", kind="tick")
    assert plain == "created"
    schedules = tmp_path / "schedules.toml"
    schedules.write_text(
        '[schedules.filed]\nevery = "1m"\nkind = "tock"\ntags = ["nightly", "tenant:42"]\n'
    )
    sync_schedules(conn.info.dsn, schedules)
    registry = pgbeat.Registry()
    seen: dict[str, tuple[str, ...]] = {}

    @registry.handler("tock")
    def tock(payload: Any, job: pgbeat.JobContext) -> None:
        seen["filed"] = job.tags

    drain(conn, registry)  # the periods due now, as a scheduler's tick enqueues them
    assert seen["filed"] == ("nightly", "tenant:42")
    manual = {name: run_schedule_now(conn, name) for name in ("filed", "coded", "plain")}
    stored = tags_of(conn)
    assert stored[manual["filed"]] == ["nightly", "tenant:42"]
    assert stored[manual["coded"]] == ["a", "b"]
    assert stored[manual["plain"]] is None
    # a change of tags alone is a change of the definition
    assert pgbeat.upsert_schedule(conn, "coded", every="1m", kind="tick", tags=["c"]) == "updated"


def test_a_schedules_tags_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tags"):
        build_schedule("s", {"every": "1m", "tags": ["x" * 101]})
    schedules = schedules_toml(tmp_path, '[schedules.s]\nevery = "1m"\ntags = "one"\n')
    checked = run_cli_here(["schedules", "check", str(schedules)], None)
    assert checked.returncode == 1 and "tags" in checked.stdout + checked.stderr
    assert "Traceback" not in checked.stderr and "list of strings" in checked.stderr


def test_assert_enqueued_matches_tags(conn: psycopg.Connection[Any]) -> None:
    from pgbeat.testing import assert_enqueued, refute_enqueued

    pgbeat.enqueue(conn, "k", tags=["a", "b"])
    assert [job.tags for job in assert_enqueued(conn, "k", tags=["a", "b"])] == [["a", "b"]]
    refute_enqueued(conn, "k", tags=["a"])
