"""The dashboard's security rules and page behaviour over real HTTP (uvicorn, PostgreSQL).

Who may see what (token login, session cookie, read-only, viewer token), what a POST
must carry (CSRF token, same origin), which Host names are answered, the headers of
every response, payload masking, and bulk actions that re-check each job's status.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

import httpx
import psycopg
import pytest

from tests.helpers import CliProcess, free_port, run_cli, start_cli, wait_for
from tests.integration.ui_support import (
    ADMIN_TOKEN,
    VIEWER_TOKEN,
    Dashboard,
    dashboard,
)

CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


@pytest.fixture(scope="module")
def secured(ui_database: str, schedules_file: Path) -> Iterator[Dashboard]:
    with dashboard(
        ui_database,
        token=ADMIN_TOKEN,
        viewer_token=VIEWER_TOKEN,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def open_local(ui_database: str, schedules_file: Path) -> Iterator[Dashboard]:
    """No token, as on a developer's machine: only loopback, and only this origin."""
    with dashboard(ui_database, hide_payloads=False) as running:
        yield running


@contextmanager
def logged_in(ui: Dashboard, token: str = ADMIN_TOKEN) -> Iterator[httpx.Client]:
    """A client holding a session opened with ``token``."""
    with httpx.Client(base_url=ui.origin, timeout=10) as client:
        page = client.get(f"{ui.url}/login")
        response = client.post(
            f"{ui.url}/login",
            data={"token": token, "csrf": csrf_of(page.text), "next": f"{ui.url}/jobs"},
        )
        assert response.status_code == 303, response.text
        yield client


def csrf_of(html: str) -> str:
    match = CSRF.search(html)
    assert match, "no CSRF field on the page"
    return match.group(1)


def job_status(url: str, job_id: int) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT status FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return str(row[0])


def new_job(url: str, status: str = "failed", kind: str = "probe") -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO jobs (kind, payload, status, last_error, finished_at)"
            " VALUES (%s, '{}', %s, 'ValueError: x', now()) RETURNING id",
            (kind, status),
        ).fetchone()
    assert row is not None
    return int(row[0])


# -- authentication ------------------------------------------------------------------------


def test_health_needs_no_login_and_pages_do(secured: Dashboard) -> None:
    with httpx.Client(base_url=secured.origin) as client:
        assert client.get("/healthz").text == "ok\n"
        page = client.get("/jobs?status=failed")
        assert page.status_code == 303
        assert page.headers["location"] == "/login?next=/jobs?status=failed"
        assert client.post("/jobs/1/retry", data={"csrf": "x"}).status_code == 401


def test_a_wrong_token_is_refused_and_the_right_one_opens_a_strict_session(
    secured: Dashboard,
) -> None:
    with httpx.Client(base_url=secured.origin) as client:
        page = client.get("/login")
        wrong = client.post("/login", data={"token": "guess" * 5, "csrf": csrf_of(page.text)})
        assert wrong.status_code == 401
        assert "pgbeat_session" not in wrong.headers.get("set-cookie", "")
        right = client.post(
            "/login", data={"token": ADMIN_TOKEN, "csrf": csrf_of(page.text), "next": "/failures"}
        )
        assert right.status_code == 303 and right.headers["location"] == "/failures"
        cookie = right.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        assert client.get("/failures").status_code == 200


def test_login_never_redirects_to_another_site(secured: Dashboard) -> None:
    with httpx.Client(base_url=secured.origin) as client:
        for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
            page = client.get("/login")
            response = client.post(
                "/login", data={"token": ADMIN_TOKEN, "csrf": csrf_of(page.text), "next": target}
            )
            assert response.headers["location"] == "/", target


def test_a_bearer_token_works_for_scripts(secured: Dashboard) -> None:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    response = httpx.get(f"{secured.origin}/processes", headers=headers)
    assert response.status_code == 200


# -- what a POST must carry ----------------------------------------------------------------


def test_a_post_without_the_form_token_is_refused(secured: Dashboard, ui_database: str) -> None:
    job = new_job(ui_database)
    with logged_in(secured) as client:
        assert client.post(f"/jobs/{job}/retry", data={"x": "1"}).status_code == 403
        assert client.post(f"/jobs/{job}/retry", data={"csrf": "0" * 64}).status_code == 403
    assert job_status(ui_database, job) == "failed"


def test_cross_site_posts_are_refused_even_with_a_valid_token(
    open_local: Dashboard, ui_database: str
) -> None:
    job = new_job(ui_database)
    with httpx.Client(base_url=open_local.origin) as client:
        token = csrf_of(client.get(f"/jobs/{job}").text)
        for headers in (
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
            {"Origin": "http://evil.example"},
            {"Origin": "null"},
        ):
            response = client.post(f"/jobs/{job}/retry", data={"csrf": token}, headers=headers)
            assert response.status_code == 403, headers
        assert job_status(ui_database, job) == "failed"
        same = {"Origin": open_local.origin, "Sec-Fetch-Site": "same-origin"}
        response = client.post(f"/jobs/{job}/retry", data={"csrf": token}, headers=same)
        assert response.status_code == 303
    assert job_status(ui_database, job) == "pending"


def test_forms_must_be_url_encoded(open_local: Dashboard, ui_database: str) -> None:
    job = new_job(ui_database)
    with httpx.Client(base_url=open_local.origin) as client:
        token = csrf_of(client.get("/jobs").text)
        response = client.post(f"/jobs/{job}/retry", files={"csrf": (None, token)})
        assert response.status_code == 415
    assert job_status(ui_database, job) == "failed"


def test_foreign_host_names_are_refused_against_dns_rebinding(open_local: Dashboard) -> None:
    port = urlsplit(open_local.origin).port
    with httpx.Client(base_url=open_local.origin) as client:
        assert client.get("/", headers={"Host": f"evil.example:{port}"}).status_code == 400
        assert client.get("/", headers={"Host": f"localhost:{port}"}).status_code == 200


def test_every_response_carries_a_strict_policy(open_local: Dashboard) -> None:
    for path in ("/", "/jobs", "/static/pgbeat.css", "/healthz", "/no-such-page"):
        headers = httpx.get(open_local.origin + path).headers
        assert "default-src 'none'" in headers["content-security-policy"], path
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "same-origin"


# -- read-only -----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["--read-only", "viewer token"])
def test_read_only_hides_and_refuses_every_action(
    how: str, secured: Dashboard, ui_database: str, schedules_file: Path
) -> None:
    job = new_job(ui_database)
    if how == "viewer token":
        with logged_in(secured, VIEWER_TOKEN) as client:
            check(client, job, ui_database)
        return
    with (
        dashboard(ui_database, read_only=True) as ui,
        httpx.Client(base_url=ui.origin) as client,
    ):
        check(client, job, ui_database)


def check(client: httpx.Client, job: int, url: str) -> None:
    pending = new_job(url, "pending")
    for path in (f"/jobs/{job}", f"/jobs/{pending}", "/jobs?status=failed", "/failures?window=24h"):
        page = client.get(path).text
        assert "Read-only" in page
        assert "<button" not in page.split("<main", 1)[1].replace(
            '<button type="submit">Filter</button>', ""
        ), path
    token = csrf_of(client.get("/jobs").text)
    before = _schedule_state(url)
    posts = [
        (f"/jobs/{job}/retry", {}),
        (f"/jobs/{job}/delete", {}),
        (f"/jobs/{pending}/run_now", {}),
        (f"/jobs/{pending}/cancel", {}),
        ("/jobs/bulk", {"action": "retry", "ids": str(job)}),
        ("/jobs/bulk", {"action": "cancel", "ids": str(pending)}),
        ("/schedules/nightly_report/pause", {}),
        ("/schedules/nightly_report/resume", {}),
        ("/schedules/nightly_report/run", {}),
    ]
    for path, data in posts:
        response = client.post(path, data={"csrf": token, **data})
        assert response.status_code == 403, path
    confirm = client.get("/jobs/confirm?status=failed&action=retry")
    assert confirm.status_code == 403
    assert job_status(url, job) == "failed"
    assert job_status(url, pending) == "pending"
    assert _schedule_state(url) == before  # not paused, resumed or run


def _schedule_state(url: str) -> tuple[object, ...]:
    """nightly_report's pause columns and how many manual runs it has."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT paused, paused_at, resumed_at, (SELECT count(*) FROM jobs "
            "WHERE unique_key LIKE 'nightly\\_report@manual:%%') "
            "FROM pgbeat_schedules WHERE name = 'nightly_report'"
        ).fetchone()
    assert row is not None
    return tuple(row)


# -- pages ---------------------------------------------------------------------------------


def _rows(page: str) -> str:
    """The jobs table of a page, without the filter form (which echoes what was typed)."""
    return page.split("<table", 1)[1].split("</table>", 1)[0] if "<table" in page else ""


def test_payload_secrets_are_masked_and_hide_payloads_hides_them(
    open_local: Dashboard, ui_database: str, schedules_file: Path
) -> None:
    page = httpx.get(f"{open_local.origin}/jobs?payload=%7B%22tenant%22%3A%22acme%22%7D").text
    rows = _rows(page)
    assert "acme" in rows and "globex" not in rows  # the filter found the rows it names
    assert "api_key" in rows and "sk-live-" not in page  # the key shows, its value does not
    every = _rows(httpx.get(f"{open_local.origin}/jobs").text)
    assert "globex" in every and "acme" in every  # the same view shows payloads at all
    with dashboard(ui_database, hide_payloads=True) as ui:
        hidden = httpx.get(f"{ui.origin}/jobs").text
        job = httpx.get(f"{ui.origin}/jobs/1").text
    for text in (_rows(hidden), job):
        assert "payloads are hidden" in text
        assert not any(word in text for word in ("acme", "globex", "sk-live-", "api_key"))


def test_a_bad_filter_is_reported_not_guessed(open_local: Dashboard) -> None:
    page = httpx.get(f"{open_local.origin}/jobs?payload=%7Bnope").text
    assert "payload: not JSON" in page


def test_retry_all_matching_reports_jobs_whose_status_changed(
    open_local: Dashboard, ui_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pgbeat.ui.audit")
    jobs = [new_job(ui_database, kind="bulk_probe") for _ in range(4)]
    with httpx.Client(base_url=open_local.origin) as client:
        confirm = client.get("/jobs/confirm?status=failed&kind=bulk_probe&action=retry")
        assert "Retry 4 jobs?" in confirm.text
        form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', confirm.text))
        with psycopg.connect(ui_database, autocommit=True) as conn:  # a worker got there first
            conn.execute("UPDATE jobs SET status = 'done' WHERE id = %s", (jobs[0],))
        done = client.post("/jobs/bulk", data=form)
        assert done.status_code == 303
        page = client.get(done.headers["location"]).text
    assert "Retried 3, skipped 1 whose status changed." in page
    assert [job_status(ui_database, j) for j in jobs] == ["done", "pending", "pending", "pending"]
    [audit] = [r for r in caplog.records if r.name == "pgbeat.ui.audit"]
    assert audit.getMessage().startswith("ui action retry by anon@127.0.0.1: filter=")
    assert "affected=3 skipped=1" in audit.getMessage()


@pytest.mark.slow
def test_the_non_loopback_start_without_a_token_is_refused(ui_database: str) -> None:
    result = run_cli(["ui", "--host", "0.0.0.0", "--port", "1"], ui_database, timeout=30)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "pgbeat: error: refusing to serve the dashboard on 0.0.0.0 without a token: "
        "set PGBEAT_UI_TOKEN or --token-file (or bind to 127.0.0.1)"
    ]


# -- the prefix ----------------------------------------------------------------------------


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, bool]] = []  # (URL, whether a GET may follow it)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        posts = tag == "form" and dict(attrs).get("method") == "post"
        for name, value in attrs:
            if value is not None and name in ("href", "src", "action"):
                self.found.append((value, not posts))


def test_every_link_form_and_asset_stays_under_the_prefix(
    ui_database: str, schedules_file: Path
) -> None:
    with (
        dashboard(ui_database, prefix="/pgbeat") as ui,
        httpx.Client(base_url=ui.origin) as client,
    ):
        assert client.get("/").headers["location"] == "/pgbeat/"
        seen: set[str] = set()
        queue = ["/pgbeat/"]
        while queue and len(seen) < 60:
            path = queue.pop(0)
            if path in seen:
                continue
            seen.add(path)
            response = client.get(path)
            assert response.status_code == 200, path
            if "text/html" not in response.headers["content-type"]:
                continue
            parser = Links()
            parser.feed(response.text)
            for link, follow in parser.found:
                if link.startswith("data:"):
                    continue
                target = urljoin(path, link)
                assert target.startswith("/pgbeat/"), f"{link} on {path}"
                if follow and "/confirm" not in target and "before=" not in target:
                    queue.append(target.split("#")[0])
        assert {"/pgbeat/schedules", "/pgbeat/static/pgbeat.js"} <= {s.split("?")[0] for s in seen}


def test_cancel_keeps_the_record_as_cancelled_and_only_finished_jobs_are_deleted(
    open_local: Dashboard, ui_database: str
) -> None:
    pending, running = new_job(ui_database, "pending"), new_job(ui_database, "running")
    with httpx.Client(base_url=open_local.origin) as client:
        token = csrf_of(client.get("/jobs").text)
        for job, action in ((pending, "cancel"), (running, "delete"), (running, "retry")):
            client.post(f"/jobs/{job}/{action}", data={"csrf": token})
        assert job_status(ui_database, pending) == "cancelled"
        assert job_status(ui_database, running) == "running"
        client.post(f"/jobs/{pending}/delete", data={"csrf": token})
    with psycopg.connect(ui_database, autocommit=True) as conn:
        assert conn.execute("SELECT 1 FROM jobs WHERE id = %s", (pending,)).fetchone() is None


def test_a_running_job_page_offers_cancel_and_a_done_one_shows_its_result(
    open_local: Dashboard, ui_database: str
) -> None:
    running, done = new_job(ui_database, "running"), new_job(ui_database, "done")
    with psycopg.connect(ui_database, autocommit=True) as conn:
        conn.execute(
            """UPDATE jobs SET result = '{"rows": 42, "note": "<b>"}' WHERE id = %s""", (done,)
        )
    with httpx.Client(base_url=open_local.origin, follow_redirects=True) as client:
        page = client.get(f"/jobs/{running}").text
        assert f'/jobs/{running}/cancel"' in page
        token = csrf_of(page)
        answer = client.post(f"/jobs/{running}/cancel", data={"csrf": token})
        assert "its handler is told to stop" in answer.text
        shown = client.get(f"/jobs/{done}").text
    assert "<h2>Result</h2>" in shown and "&#34;rows&#34;: 42" in shown and "&lt;b&gt;" in shown
    with psycopg.connect(ui_database, autocommit=True) as conn:
        row = conn.execute(
            "SELECT status, cancel_requested_at IS NOT NULL, last_error FROM jobs WHERE id = %s",
            (running,),
        ).fetchone()
    assert row is not None and row[:2] == ("running", True)  # its worker ends it cancelled
    assert row[2].startswith("cancelled: via the dashboard by ")


@pytest.mark.slow
@contextmanager
def pgbeat_ui(database: str, *flags: str, prefix: str = "") -> Iterator[tuple[str, CliProcess]]:
    """``pgbeat ui`` on a free port, once it answers: its base URL and the process (stopped
    when the block ends)."""
    port = free_port()
    prefixed = ["--prefix", prefix] if prefix else []
    server = start_cli(["ui", "--port", str(port), *prefixed, *flags], database)
    base = f"http://127.0.0.1:{port}{prefix}"

    def healthy() -> bool:
        try:
            return httpx.get(base + "/healthz").text == "ok\n"
        except httpx.HTTPError:
            return False

    try:
        wait_for(healthy, timeout=30, message="pgbeat ui answering")
        yield base, server
    finally:
        server.stop()


def test_pgbeat_ui_serves_the_dashboard(ui_database: str, schedules_file: Path) -> None:
    with pgbeat_ui(ui_database, prefix="/ops") as (base, server):
        page = httpx.get(base + "/schedules")
        assert page.status_code == 200 and "nightly_report" in page.text
    output = server.output()
    assert "pgbeat ui: http://127.0.0.1:" in output and "Traceback" not in output


# -- login hardening -------------------------------------------------------------------------


def _login(client: httpx.Client, token: str) -> httpx.Response:
    page = client.get("/login")
    return client.post("/login", data={"token": token, "csrf": csrf_of(page.text), "next": "/"})


def test_logout_revokes_the_session(ui_database: str, schedules_file: Path) -> None:
    with (
        dashboard(ui_database, token=ADMIN_TOKEN) as ui,
        httpx.Client(base_url=ui.origin) as client,
    ):
        assert _login(client, ADMIN_TOKEN).status_code == 303
        stolen = client.cookies["pgbeat_session"]
        assert client.get("/jobs").status_code == 200
        token = csrf_of(client.get("/jobs").text)
        assert client.post("/logout", data={"csrf": token}).status_code == 303
        with httpx.Client(base_url=ui.origin, cookies={"pgbeat_session": stolen}) as thief:
            assert thief.get("/jobs").status_code == 303  # back to the login page


def test_failed_logins_are_throttled_and_bearer_failures_logged(
    ui_database: str, schedules_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="pgbeat.ui"),
        dashboard(ui_database, token=ADMIN_TOKEN) as ui,
        httpx.Client(base_url=ui.origin) as client,
    ):
        bearer = client.get("/jobs", headers={"Authorization": "Bearer not-the-token-at-all"})
        assert bearer.status_code == 303
        assert any("bearer token refused" in r.getMessage() for r in caplog.records)
        statuses = [_login(client, f"guess-{i:020d}").status_code for i in range(4)]
        assert statuses == [401] * 4  # with the bearer failure above: five in the window
        throttled = _login(client, ADMIN_TOKEN)  # even the right token waits now
        assert throttled.status_code == 429 and "try again" in throttled.text
        assert int(throttled.headers["retry-after"]) >= 1
        bearer = client.get("/jobs", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        assert bearer.status_code == 429


def test_a_viewer_token_equal_to_the_admin_token_is_refused() -> None:
    from pgbeat.errors import UiError
    from pgbeat.ui.settings import UiSettings

    with pytest.raises(UiError, match="viewer token must differ"):
        UiSettings(database_url="x", token=ADMIN_TOKEN, viewer_token=f" {ADMIN_TOKEN} ")


@pytest.mark.slow
def test_pgbeat_ui_refuses_equal_tokens_and_sets_a_secure_cookie(
    ui_database: str, schedules_file: Path, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    same = run_cli(
        ["ui", "--token-file", str(token_file), "--viewer-token-file", str(token_file)],
        ui_database,
    )
    assert same.returncode == 1 and "viewer token must differ" in same.stderr
    assert "Traceback" not in same.stderr
    flags = ("--token-file", str(token_file), "--secure-cookie")
    with pgbeat_ui(ui_database, *flags) as (base, _), httpx.Client(base_url=base) as client:
        response = _login(client, ADMIN_TOKEN)
    assert response.status_code == 303
    assert "secure" in response.headers["set-cookie"].lower()  # over plain http, too


# -- escaping --------------------------------------------------------------------------------

MARKUP = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_markup_in_every_rendered_field_is_escaped(open_local: Dashboard, ui_database: str) -> None:
    """Payloads, errors, kinds, keys and schedule names come from users: a template that
    marked one of them safe would run its markup in the operator's browser."""
    import pgbeat

    with psycopg.connect(ui_database, autocommit=True) as conn:
        row = conn.execute(
            "INSERT INTO jobs (kind, payload, status, last_error, finished_at, unique_key)"
            " VALUES (%s, %s, 'failed', %s, now(), %s) RETURNING id",
            (MARKUP, psycopg.types.json.Jsonb({"note": MARKUP, MARKUP: 1}), MARKUP, MARKUP),
        ).fetchone()
        assert row is not None
        pgbeat.upsert_schedule(conn, "escaping", every="1h", kind=MARKUP, payload={"n": MARKUP})
    pages = [
        f"/jobs/{row[0]}", "/jobs", "/jobs?status=failed", "/failures?window=24h", "/",
        "/schedules", "/schedules/escaping", f"/jobs?kind={quote(MARKUP)}",
    ]  # fmt: skip
    for path in pages:
        page = httpx.get(open_local.origin + path)
        assert page.status_code == 200, path
        assert "<script>alert" not in page.text and "<img src=x" not in page.text, path
    detail = httpx.get(f"{open_local.origin}/jobs/{row[0]}").text
    assert "&lt;script&gt;" in detail  # the markup is shown, as text
