"""Security: no SQL built from strings, no password in any output, metrics on loopback only."""

from __future__ import annotations

import ast
import re
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.chaos.harness import APP, ROOT
from tests.helpers import PROCESS_START, CliProcess, run_cli, start_cli, wait_for

# Every module of the package, in every subpackage, the statement modules of db/sql/ too:
# they hold literals and psycopg.sql compositions, never text joined from strings.
SOURCES = sorted((ROOT / "src" / "pgbeat").rglob("*.py"))
# Upper-case statement words, or a lower-case statement shape.
SQL = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE)\b"
    r"|(?i:\bselect\b.*\bfrom\b|\binsert\s+into\b|\bupdate\s+\S+\s+set\b|\bdelete\s+from\b)",
    re.DOTALL,
)


def _text(node: ast.AST) -> str | None:
    """The literal text of a string constant or an f-string (placeholders as '?')."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else "?"
            for part in node.values
        )
    return None


# A private statement fragment of db/sql/ (``_CLAIMED_COLUMNS``): a constant, never a value.
FRAGMENT = re.compile(r"_[A-Z][A-Z0-9_]*")


def _composed(node: ast.AST) -> bool:
    """Whether ``node`` joins only literals and statement fragments (issue 39: claim
    statements composed once, at import, from shared fragments), never a value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.Name):
        return FRAGMENT.fullmatch(node.id) is not None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _composed(node.left) and _composed(node.right)
    return False


def _literals(node: ast.AST) -> Iterator[str]:
    """The string literals of a chain of ``+``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield from _literals(node.left)
        yield from _literals(node.right)
    elif (text := _text(node)) is not None:
        yield text


def sql_built_from_strings(source: str) -> Iterator[tuple[int, str]]:
    """(line, how) for every f-string, %, + or .format() that builds SQL text."""
    for node in ast.walk(ast.parse(source)):
        text: str | None = None
        how = ""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            if _composed(node):
                continue  # fragments composed at import
            if any(isinstance(side, ast.BinOp) for side in (node.left, node.right)):
                literals = " ".join(_literals(node))
                if SQL.search(literals):
                    yield getattr(node, "lineno", 0), "+ concatenation"
                continue
        if isinstance(node, ast.JoinedStr):
            text, how = _text(node), "f-string"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            text, how = _text(node.left), "% formatting"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            texts = [_text(node.left), _text(node.right)]
            if None in texts:  # literal + literal is just a long literal
                text, how = " ".join(t for t in texts if t), "+ concatenation"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
        ):
            text, how = _text(node.func.value), ".format()"
        if text and SQL.search(text):
            yield getattr(node, "lineno", 0), how


@pytest.mark.parametrize(
    "snippet",
    [
        'q = f"SELECT * FROM jobs WHERE id = {job_id}"',
        "q = \"DELETE FROM jobs WHERE kind = '%s'\" % kind",
        'q = "UPDATE jobs SET status = " + status',
        'q = "UPDATE jobs SET status = " + _X + status',
        'q = "INSERT INTO jobs (kind) VALUES ({})".format(kind)',
        'q = f"select id from jobs where kind = {kind}"',
    ],
)
def test_the_detector_finds_sql_built_from_strings(snippet: str) -> None:
    assert list(sql_built_from_strings(snippet)), snippet


@pytest.mark.parametrize(
    "snippet",
    [
        'log.info("selected %s jobs", n)',
        'message = f"cannot select {name}"',
        'q = "SELECT 1 " "FROM jobs"',
        'conn.execute(claim_sql.JOBS_CLAIM, {"limit": n})',
        'JOBS_X = "UPDATE jobs" + _SET_RUNNING + " WHERE id = 1" + _RETURNING',
    ],
)
def test_the_detector_leaves_other_strings_alone(snippet: str) -> None:
    assert not list(sql_built_from_strings(snippet)), snippet


def test_no_sql_is_built_from_strings() -> None:
    assert len(SOURCES) > 60
    found = [
        f"{path.relative_to(ROOT)}:{line}: {how}"
        for path in SOURCES
        for line, how in sql_built_from_strings(path.read_text())
    ]
    assert not found, "SQL built from strings (put it in db/sql/):\n" + "\n".join(found)


# -- passwords ---------------------------------------------------------------------------------

SECRET = "s3cret"
UNREACHABLE = f"postgresql://user:{SECRET}@127.0.0.1:1/db"


@pytest.mark.parametrize("command", [["worker", APP], ["scheduler", "--schedules", "{path}"]])
@pytest.mark.slow
def test_unreachable_database_never_prints_the_password(command: list[str], tmp_path: Path) -> None:
    path = tmp_path / "schedules.toml"
    path.write_text('[schedules.s]\nevery = "1s"\n')
    args = [part.format(path=path) for part in command]
    for url_args, env_url in (([], UNREACHABLE), (["--database-url", UNREACHABLE], None)):
        result = run_cli([*args, *url_args], env_url, cwd=str(ROOT))
        assert result.returncode == 1
        assert "database unavailable" in result.stderr
        assert SECRET not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "url",
    [
        f"host=127.0.0.1 port=1 user=u password={SECRET} dbname=db",
        f"postgresql://u@127.0.0.1:1/db?password={SECRET}",
        # An unescaped "@": libpq takes "pa" as the password and "s3cret@127.0.0.1" as the host.
        f"postgresql://u:pa@{SECRET}@127.0.0.1:1/db",
    ],
)
@pytest.mark.slow
def test_other_url_forms_never_print_the_password(url: str) -> None:
    result = run_cli(["worker", APP, "--database-url", url], None, cwd=str(ROOT))
    assert result.returncode == 1
    assert SECRET not in result.stderr, result.stderr


def with_password(url: str) -> str:
    parts = urlsplit(url)
    user = parts.username or "postgres"
    netloc = f"{user}:{SECRET}@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


TERMINATE = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND application_name LIKE 'pgbeat-%'"""


@pytest.mark.slow
def test_running_processes_losing_the_database_never_print_the_password(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    if not database_url.startswith("postgresql://") or urlsplit(database_url).hostname is None:
        pytest.skip("needs a URL with a user part (DATABASE_URL, trust authentication)")
    url = with_password(database_url)
    path = tmp_path / "schedules.toml"
    path.write_text('[schedules.s]\nevery = "1s"\n')
    processes = [
        start_cli(["worker", APP], url, cwd=str(ROOT)),
        start_cli(["scheduler", "--schedules", str(path)], url, cwd=str(ROOT)),
    ]
    try:
        wait_for(
            lambda: _registered(conn, processes), timeout=PROCESS_START, message="both processes up"
        )
        conn.execute(TERMINATE)
        wait_for(
            lambda: all("retrying" in p.output() for p in processes),
            timeout=30,
            message="both processes logging the lost database",
        )
        reports = [run_cli([*c, "--database-url", url], None) for c in (["status"], ["health"])]
    finally:
        outputs = [p.stop() for p in processes]
    printed = "".join(outputs) + "".join(r.stdout + r.stderr for r in reports)
    assert SECRET not in printed


def _registered(conn: psycopg.Connection[Any], processes: list[CliProcess]) -> bool:
    pids = {row[0] for row in conn.execute("SELECT pid FROM pgbeat_processes")}
    return {p.pid for p in processes} <= pids


# -- metrics ----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def other_addresses() -> list[str]:
    """This machine's IPv4 addresses that are not loopback."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return []
    return [a for a in out.stdout.split() if "." in a and not a.startswith("127.")]


def listening(port: int) -> list[str]:
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, timeout=5, check=True)
    return [
        line.split()[3] for line in out.stdout.splitlines() if line.split()[3].endswith(f":{port}")
    ]


@pytest.mark.slow
def test_metrics_listen_on_loopback_by_default(database_url: str) -> None:
    port = free_port()
    worker = start_cli(["worker", APP, "--metrics-port", str(port)], database_url, cwd=str(ROOT))
    try:
        wait_for(
            lambda: _scrape(f"http://127.0.0.1:{port}/metrics"),
            timeout=PROCESS_START,
            message="metrics",
        )
        assert listening(port) == [f"127.0.0.1:{port}"]
        for address in other_addresses():
            with socket.socket() as probe, pytest.raises(OSError):
                probe.settimeout(2)
                probe.connect((address, port))
    finally:
        worker.stop()


def _scrape(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return b"pgbeat_" in response.read()
    except OSError:
        return False
