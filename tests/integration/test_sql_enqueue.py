"""pgbeat_enqueue(), the enqueue of SQL (migration 0016): the Python API's checks and job
keys, a trigger's transaction, the wake-up of workers, and the least-privilege roles."""

from __future__ import annotations

import select
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.testing import drain
from tests.helpers import run_cli
from tests.integration.test_least_privilege import logins  # noqa: F401  (a fixture)


def sql_enqueue(conn: psycopg.Connection[Any], args: str, params: Any = None) -> Any:
    row = conn.execute(f"SELECT pgbeat_enqueue({args})", params).fetchone()
    assert row is not None
    return row[0]


def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    cur = conn.cursor(row_factory=psycopg.rows.dict_row)
    row = cur.execute("SELECT * FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row


def test_a_plain_literal_enqueues_with_the_api_defaults(conn: psycopg.Connection[Any]) -> None:
    job_id = sql_enqueue(conn, "'mail', priority => 5")
    row = job_row(conn, job_id)
    assert (row["kind"], row["payload"], row["priority"]) == ("mail", {}, 5)
    assert row["queue"] == "default"
    assert (row["max_attempts"], row["status"], row["limit_key"], row["tags"]) == (
        8,
        "pending",
        None,
        None,
    )
    python_id = pgbeat.enqueue(conn, "mail", priority=5)
    assert python_id is not None
    python_row = job_row(conn, python_id)
    for column in ("payload", "queue", "priority", "max_attempts", "status", "attempts"):
        assert row[column] == python_row[column], column


def test_every_argument_reaches_the_row(conn: psycopg.Connection[Any]) -> None:
    run_at = datetime(2031, 5, 4, 3, 2, 1, tzinfo=UTC)
    job_id = sql_enqueue(
        conn,
        "'report', '{\"n\": 1}', %s, 'reports', -3, 'customer:7', 3, NULL, 'ignore', "
        "ARRAY['tenant:42', 'billing']",
        (run_at,),
    )
    row = job_row(conn, job_id)
    assert row["payload"] == {"n": 1}
    assert row["run_at"] == run_at
    assert (row["queue"], row["priority"], row["limit_key"], row["max_attempts"]) == (
        "reports",
        -3,
        "customer:7",
        3,
    )
    assert row["tags"] == ["tenant:42", "billing"]


# (SQL arguments, the Python API's keyword arguments, the word the error must name)
REFUSED = [
    ("''", {"kind": ""}, "kind"),
    ("repeat('k', 201)", {"kind": "k" * 201}, "kind"),
    ("'k', priority => 32768", {"priority": 32768}, "priority"),
    ("'k', priority => -32769", {"priority": -32769}, "priority"),
    ("'k', priority => NULL", {"priority": None}, "priority"),
    ("'k', queue => ''", {"queue": ""}, "queue"),
    ("'k', queue => ' q'", {"queue": " q"}, "queue"),
    ("'k', queue => repeat('q', 201)", {"queue": "q" * 201}, "queue"),
    ("'k', limit_key => ''", {"limit_key": ""}, "limit_key"),
    ("'k', limit_key => repeat('l', 1001)", {"limit_key": "l" * 1001}, "limit_key"),
    ("'k', max_attempts => 0", {"max_attempts": 0}, "max_attempts"),
    ("'k', job_key => ''", {"job_key": ""}, "job_key"),
    ("'k', job_key => repeat('j', 1001)", {"job_key": "j" * 1001}, "job_key"),
    (
        "'k', run_at => '0001-01-01 00:00:00+00'",
        {"run_at": datetime(1, 1, 1, tzinfo=UTC)},
        "run_at",
    ),
    ("'k', run_at => 'infinity'", None, "run_at"),
    ("'k', on_conflict => 'merge'", {"job_key": "a", "on_conflict": "merge"}, "on_conflict"),
    ("'k', on_conflict => 'replace'", {"on_conflict": "replace"}, "on_conflict"),
    ("'k', tags => array_fill('t'::text, ARRAY[21])", {"tags": ["t"] * 21}, "tags"),
    ("'k', tags => ARRAY[repeat('t', 101)]", {"tags": ["t" * 101]}, "tags"),
    ("'k', tags => ARRAY['']", {"tags": [""]}, "tags"),
    ("'k', tags => ARRAY[NULL]::text[]", {"tags": [None]}, "tags"),
    ("'k', payload => jsonb_build_object('big', repeat('x', 1048576))", None, "payload"),
]


@pytest.mark.parametrize(("args", "python", "field"), REFUSED)
def test_refuses_what_the_api_refuses_naming_the_field(
    conn: psycopg.Connection[Any], args: str, python: dict[str, Any] | None, field: str
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
        sql_enqueue(conn, args)
    assert field in str(refused.value).split(":")[1], str(refused.value)
    if python is not None:
        kwargs = {"kind": "k", **python}
        with pytest.raises((TypeError, ValueError)):
            pgbeat.enqueue(conn, **kwargs)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


# (SQL arguments, the whole message): 0016's words, which migration 0025 keeps; where two
# arguments are wrong, the first in the Python API's order is named.
MESSAGES = [
    ("'', queue => ''", "kind must be a non-empty string"),
    ("repeat('k', 201)", "kind has 201 characters, at most 200 are allowed"),
    ("'k', queue => '', priority => NULL", "queue must be a non-empty string"),
    ("'k', queue => ' q'", "queue ' q' has leading or trailing spaces"),
    ("'k', priority => NULL", "priority must be between -32768 and 32767, got NULL"),
    ("'k', limit_key => '', job_key => ''", "limit_key must be NULL or a non-empty string"),
    (
        "'k', job_key => repeat('é', 501)",
        "job_key has 1002 bytes of UTF-8, at most 1000 are allowed",
    ),
    (
        "'k', on_conflict => NULL",
        "on_conflict must be one of ignore, replace, keep_earliest, keep_latest",
    ),
    ("'k', tags => ARRAY[ARRAY['a'], ARRAY['b']]", "tags must be a one-dimensional array of text"),
    ("'k', tags => array_fill('t'::text, ARRAY[21])", "tags has 21 tags, at most 20 are allowed"),
]


@pytest.mark.parametrize(("args", "message"), MESSAGES)
def test_each_refusal_says_the_first_problem_in_its_words(
    conn: psycopg.Connection[Any], args: str, message: str
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
        sql_enqueue(conn, args)
    assert refused.value.diag.message_primary == f"pgbeat_enqueue: {message}"


def test_a_payload_limit_setting_is_honoured(conn: psycopg.Connection[Any]) -> None:
    conn.execute("SET pgbeat.max_payload_bytes = 20")
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="payload"):
        sql_enqueue(conn, "'k', '{\"text\": \"more than twenty bytes\"}'")
    assert sql_enqueue(conn, "'k', '{\"a\": 1}'") is not None


def test_job_keys_and_their_on_conflict_modes(conn: psycopg.Connection[Any]) -> None:
    first = sql_enqueue(conn, "'remind', '{\"v\": 1}', job_key => 'user:1'")
    assert sql_enqueue(conn, "'remind', '{\"v\": 2}', job_key => 'user:1'") is None
    assert job_row(conn, first)["payload"] == {"v": 1}
    later = datetime(2040, 1, 1, tzinfo=UTC)
    replaced = sql_enqueue(
        conn,
        "'remind', '{\"v\": 3}', %s, job_key => 'user:1', on_conflict => 'replace', "
        "tags => ARRAY['x']",
        (later,),
    )
    assert replaced == first
    assert (job_row(conn, first)["payload"], job_row(conn, first)["tags"]) == ({"v": 3}, ["x"])
    earlier = later - timedelta(days=1)
    kept = sql_enqueue(
        conn,
        "'remind', run_at => %s, job_key => 'user:1', on_conflict => 'keep_latest'",
        (earlier,),
    )
    assert kept == first and job_row(conn, first)["run_at"] == later
    sql_enqueue(
        conn,
        "'remind', run_at => %s, job_key => 'user:1', on_conflict => 'keep_earliest'",
        (earlier,),
    )
    assert job_row(conn, first)["run_at"] == earlier
    # A running live job keeps its run and gives up its key to a new job.
    conn.execute("UPDATE jobs SET status = 'running', attempts = 1 WHERE id = %s", (first,))
    second = sql_enqueue(conn, "'remind', job_key => 'user:1', on_conflict => 'replace'")
    assert second != first
    assert job_row(conn, first)["superseded_at"] is not None
    assert job_row(conn, second)["status"] == "pending"


def test_a_trigger_enqueues_in_the_callers_transaction(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    conn.execute("CREATE TABLE orders (id int PRIMARY KEY, customer text)")
    conn.execute(
        """CREATE FUNCTION order_placed() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN
               PERFORM pgbeat_enqueue('send_receipt', jsonb_build_object('order', NEW.id),
                                      tags => ARRAY['customer:' || NEW.customer]);
               RETURN NEW;
           END $$"""
    )
    conn.execute(
        "CREATE TRIGGER order_placed AFTER INSERT ON orders "
        "FOR EACH ROW EXECUTE FUNCTION order_placed()"
    )
    with psycopg.connect(database_url) as app:
        app.execute("INSERT INTO orders VALUES (1, 'a')")
        app.rollback()
        assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
        app.execute("INSERT INTO orders VALUES (2, 'b')")
        app.commit()
    rows = conn.execute("SELECT kind, payload, tags FROM jobs").fetchall()
    assert rows == [("send_receipt", {"order": 2}, ["customer:b"])]
    ran: list[tuple[Any, tuple[str, ...]]] = []
    registry = pgbeat.Registry()

    @registry.handler("send_receipt")
    def send_receipt(payload: Any, job: pgbeat.JobContext) -> None:
        ran.append((payload, job.tags))

    assert drain(conn, registry) == {"done": 1}
    assert ran == [({"order": 2}, ("customer:b",))]


def test_a_commit_wakes_listening_workers(database_url: str, conn: psycopg.Connection[Any]) -> None:
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN pgbeat_jobs")
        with psycopg.connect(database_url) as app:
            sql_enqueue(app, "'woken'")
            app.rollback()
            assert not select.select([listener.fileno()], [], [], 0.2)[0]
            sql_enqueue(app, "'woken'")
            app.commit()
        notices = list(listener.notifies(timeout=30, stop_after=1))
    assert [n.channel for n in notices] == ["pgbeat_jobs"]


def test_works_whatever_the_callers_search_path(conn: psycopg.Connection[Any]) -> None:
    schema = conn.execute("SELECT current_schema()").fetchone()
    assert schema is not None
    conn.execute("CREATE SCHEMA elsewhere")
    conn.execute("CREATE TABLE elsewhere.jobs (id bigint)")  # a decoy the path would find
    conn.execute("SET search_path TO elsewhere")
    job_id = conn.execute(
        psycopg.sql.SQL("SELECT {}.pgbeat_enqueue('pathless')").format(
            psycopg.sql.Identifier(schema[0])
        )
    ).fetchone()
    conn.execute("RESET search_path")
    assert job_id is not None and job_row(conn, job_id[0])["kind"] == "pathless"


def test_the_roles_it_serves_and_those_it_does_not(logins: dict[str, str]) -> None:  # noqa: F811
    with psycopg.connect(logins["enqueue"], autocommit=True) as enqueuer:
        job_id = sql_enqueue(enqueuer, "'from_role', tags => ARRAY['a']")
        assert sql_enqueue(enqueuer, "'from_role', job_key => 'k'") is not None
        assert sql_enqueue(enqueuer, "'from_role', job_key => 'k'") is None
        # rewriting a live job is the keys role's, as with pgbeat.enqueue
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            sql_enqueue(enqueuer, "'from_role', job_key => 'k', on_conflict => 'replace'")
    with psycopg.connect(logins["keys"], autocommit=True) as keys:
        assert sql_enqueue(keys, "'from_role', job_key => 'k', on_conflict => 'replace'")
    for group in ("worker", "scheduler", "ui_viewer"):
        with (
            psycopg.connect(logins[group], autocommit=True) as other,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            sql_enqueue(other, "'from_role'")
    with psycopg.connect(logins["admin"], autocommit=True) as admin:
        assert job_row(admin, job_id)["status"] == "pending"


def test_from_psql(database_url: str, conn: psycopg.Connection[Any]) -> None:
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    command = [psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", database_url, "-c"]

    def run(statement: str) -> subprocess.CompletedProcess[str]:
        run_psql = [*command, statement]
        return subprocess.run(run_psql, capture_output=True, text=True, timeout=60, check=False)

    made = run("SELECT pgbeat_enqueue('from_psql', priority => 5)")
    assert made.returncode == 0, made.stderr
    assert job_row(conn, int(made.stdout))["priority"] == 5
    refused = run("SELECT pgbeat_enqueue('from_psql', priority => 99999)")
    assert refused.returncode != 0
    assert "pgbeat_enqueue: priority must be between -32768 and 32767" in refused.stderr


def test_in_an_apps_schema_it_enqueues_there_and_wakes_that_app(database_url: str) -> None:
    done = run_cli(["migrate", "--schema", "app_sql"], database_url)
    assert done.returncode == 0, done.stderr
    with (
        psycopg.connect(database_url, autocommit=True) as public,  # search_path: public
        psycopg.connect(database_url, autocommit=True) as listener,
    ):
        listener.execute('LISTEN "pgbeat_jobs:app_sql"')
        listener.execute("LISTEN pgbeat_jobs")
        job_id = public.execute("SELECT app_sql.pgbeat_enqueue('in_app', tags => ARRAY['t'])")
        row = job_id.fetchone()
        assert row is not None
        in_app = public.execute("SELECT kind, tags FROM app_sql.jobs WHERE id = %s", row)
        assert in_app.fetchall() == [("in_app", ["t"])]
        assert public.execute("SELECT count(*) FROM public.jobs").fetchone() == (0,)
        heard = list(listener.notifies(timeout=30, stop_after=1))
    assert [n.channel for n in heard] == ["pgbeat_jobs:app_sql"]
