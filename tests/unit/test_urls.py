"""Which database a command uses, and the one-line refusals of URLs people paste."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgbeat.cli.main import main
from pgbeat.db import urls
from pgbeat.db.urls import check_url, resolve_url, scrub
from pgbeat.errors import UserError


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgresql+psycopg://app:s3cret@db/app", "SQLAlchemy"),
        ("postgresql+psycopg2://app@db/app", "SQLAlchemy"),
        ("postgres+asyncpg://app@db/app", "SQLAlchemy"),
        ("mysql://app:s3cret@db/app", "postgresql://"),
        ("http://db:5432/app", "postgresql://"),
        ("postgresql://app:p@ss@db/app", "%40"),
        ("postgresql://app:p@s@s3cret@db/app", "%40"),
        ("postgresql://app:pa/s3cret@db/app", "%2F"),
    ],
)
def test_pasted_urls_are_refused_in_one_line_without_the_password(url: str, says: str) -> None:
    with pytest.raises(UserError) as raised:
        check_url(url)
    message = str(raised.value)
    assert says in message and "\n" not in message
    assert "s3cret" not in message and "ss@db" not in message


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:p%40ss@db/app",
        "postgres://app@db:5432/app?sslmode=require",
        "postgresql://postgres@127.0.0.1:5432,127.0.0.1:5433/app?target_session_attrs=read-write",
        "postgresql:///app?host=/var/run/postgresql",
        "postgresql://[::1]:5432/app",
        "host=db dbname=app user=app password=p@ss",
        "POSTGRESQL://app@db/app",
    ],
)
def test_urls_libpq_reads_as_meant_are_accepted(url: str) -> None:
    check_url(url)


def test_no_url_is_an_error_unless_the_embedded_server_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv(urls.EMBEDDED_ENV, raising=False)
    with pytest.raises(UserError, match="no database configured"):
        resolve_url(None)
    monkeypatch.setenv("DATABASE_URL", "mysql://db/app")
    with pytest.raises(UserError, match="postgresql://"):
        resolve_url(None)
    assert resolve_url("postgresql://db/app") == "postgresql://db/app"


def test_a_short_password_is_masked_where_it_stands_not_inside_words() -> None:
    url = "postgresql://app:a@127.0.0.1:1/db"
    message = f"database unavailable ({urls.redact(url)}): password 'a' rejected"
    assert scrub(message, url) == (
        "database unavailable (postgresql://app:***@127.0.0.1:1/db): password '***' rejected"
    )
    url = "postgresql://app:data@db/x"
    assert scrub("database unavailable: data=1 no metadata", url) == (
        "database unavailable: ***=1 no metadata"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["migrate"],
        ["worker", "tests.apps.jobs_app:registry"],
        ["scheduler"],
        ["status"],
        ["enqueue", "k"],
        ["migrate", "--database-url", ""],
    ],
)
def test_a_command_without_a_database_says_so_and_starts_no_server(
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A missing or misspelt DATABASE_URL: one line, exit 1, no ./.pgbeat created."""
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv(urls.EMBEDDED_ENV, raising=False)
    monkeypatch.setenv("DATABASE_ULR", "postgresql://db/app")  # the misspelling
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("pgbeat: error: no database configured") and err.count("\n") == 1
    assert "--embedded" in err
    assert not (tmp_path / ".pgbeat").exists()
