"""Test fixtures: a real PostgreSQL for every test that touches the database.

``DATABASE_URL`` names a server to use (tests create and drop their own databases on it);
without it, an embedded server (pgserver) is started for the session. Every test gets a
fresh database cloned from a migrated template, so tests never see each other's rows.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import queue
import shutil
import signal
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import pgbeat
from pgbeat.db.migrate import apply_migrations
from tests import recycling
from tests.helpers import (
    CliProcess,
    create_database,
    drop_database,
    running_worker,
    temporary_database,
    with_database,
)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """An administrative URL of the PostgreSQL server the tests run against."""
    from_env = os.environ.get("DATABASE_URL")
    if from_env:
        yield from_env
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        directory = Path(tempfile.mkdtemp(prefix="pgbeat-test-pg-"))
        server = pgserver.get_server(directory, cleanup_mode="stop")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="session")
def template_name(server_url: str) -> Iterator[str]:
    """A migrated database that each test's database is cloned from."""
    with psycopg.connect(server_url, autocommit=True) as admin:
        name = create_database(admin, prefix=f"pgbeat_tpl_{os.getpid()}")
    with psycopg.connect(with_database(server_url, name), autocommit=True) as conn:
        apply_migrations(conn)
    yield name
    with psycopg.connect(server_url, autocommit=True) as admin:
        drop_database(admin, name)


class DatabaseSupply:
    """Fresh databases made ahead of the tests that take them, and reused or dropped after.

    Creating and dropping a database is most of a short test's time, and far more on a busy
    server (tests/recycling.py says why); a thread does it while the previous test runs,
    keeping ``ahead`` databases ready. A database whose test changed only rows is made
    fresh again in place (recycling.reset) and handed out again; any other is dropped
    while no test waits for a database (a drop waits for a checkpoint). Each
    test still gets a database that looks as a fresh clone does, and no test's rows.
    """

    def __init__(self, server_url: str, template: str, ahead: int = 2) -> None:
        self._server_url = server_url
        self._template = template
        self._ready: queue.Queue[str | BaseException] = queue.Queue()
        self._work: queue.Queue[str | None] = queue.Queue()  # names to drop; None: make one
        self._stopped = False
        self._reusable: list[str] = []  # reset in place, waiting for a test
        self._to_drop: list[str] = []  # dropped when no test waits
        self._fresh: recycling.Fresh | None = None  # None: never reset in place
        self._fresh_read = False
        self._thread = threading.Thread(target=self._run, name="database-supply", daemon=True)
        for _ in range(ahead):
            self._work.put(None)
        self._thread.start()

    def _run(self) -> None:
        with psycopg.connect(self._server_url, autocommit=True) as admin:
            while True:
                try:  # a drop (a checkpoint) waits while a test may want a database
                    item = self._work.get(timeout=0.05 if self._to_drop else None)
                except queue.Empty:
                    drop_database(admin, self._to_drop.pop())
                    continue
                if item is None and self._stopped:
                    if self._work.empty():
                        return
                    continue
                try:
                    if item is None:
                        self._ready.put(self._fresh_one(admin))
                    elif self._stopped or not self._reset(admin, item):
                        self._to_drop.append(item)
                    else:
                        self._reusable.append(item)
                except Exception as exc:  # handed to the test that waits for a database
                    if item is None:
                        self._ready.put(exc)

    def _fresh_one(self, admin: psycopg.Connection[Any]) -> str:
        """A database reset after its last test, else a new clone of the template."""
        if self._reusable:
            return self._reusable.pop()
        name = create_database(admin, self._template)
        if not self._fresh_read:  # the first clone shows what fresh looks like
            self._fresh_read = True
            try:
                self._fresh = recycling.Fresh.read(with_database(self._server_url, name))
            except psycopg.Error:  # not readable so (a server's rights): never reset in place
                self._fresh = None
        return name

    def _reset(self, admin: psycopg.Connection[Any], name: str) -> bool:
        if self._fresh is None:
            return False
        try:
            return recycling.reset(admin, with_database(self._server_url, name), name, self._fresh)
        except psycopg.Error:
            return False  # dropped instead: a test left it in a state TRUNCATE cannot undo

    def take(self) -> str:
        """A fresh database's name; the next one starts being made at once."""
        self._work.put(None)
        item = self._ready.get(timeout=120)
        if isinstance(item, BaseException):
            raise item
        return item

    def give_back(self, name: str) -> None:
        """Reset ``name`` for the next test, or drop it, in the background."""
        self._work.put(name)

    def close(self) -> None:
        """Drop what was made ahead and what is waiting to be dropped, then stop the thread."""
        self._stopped = True
        self._work.put(None)
        self._thread.join(timeout=120)
        names = self._reusable + self._to_drop
        while not self._ready.empty():
            item = self._ready.get_nowait()
            if isinstance(item, str):
                names.append(item)
        drop_at_once(self._server_url, names)


def drop_at_once(server_url: str, names: list[str]) -> None:
    """Drop these databases side by side: each DROP DATABASE waits for a checkpoint, and
    drops waiting together share one instead of taking turns."""

    def drop(name: str) -> None:
        with psycopg.connect(server_url, autocommit=True) as admin:
            drop_database(admin, name)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        list(pool.map(drop, names))


@pytest.fixture(scope="session")
def database_supply(server_url: str, template_name: str) -> Iterator[DatabaseSupply]:
    supply = DatabaseSupply(server_url, template_name)
    yield supply
    supply.close()


@pytest.fixture
def database_url(server_url: str, database_supply: DatabaseSupply) -> Iterator[str]:
    """A URL of a fresh, migrated database of this test's own, dropped afterwards."""
    name = database_supply.take()
    yield with_database(server_url, name)
    database_supply.give_back(name)


@pytest.fixture
def empty_database_url(server_url: str) -> Iterator[str]:
    """A URL of a fresh database with no schema at all (for migration tests)."""
    with temporary_database(server_url) as url:
        yield url


@pytest.fixture
def private_tmp() -> Iterator[Path]:
    """A directory of this test's own under the system's temporary directory, removed after.

    For an embedded server started as root: pgserver opens the data directory's parents to
    its ``pgserver`` user, but every pytest process that starts (another xdist worker, a
    nested pytest) closes ``/tmp/pytest-of-root`` to 0700 again, and an initdb under
    ``tmp_path`` then fails midway ("could not open file .../global/pg_control").
    """
    directory = Path(tempfile.mkdtemp(prefix="pgbeat-test-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """An autocommit connection to the test's database."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture(autouse=True)
def _root_log_handlers() -> Iterator[None]:
    """A CLI command run in-process (``main([...])``) points the root logger at the test's
    captured stderr, which pytest closes after the test: later tests' threads then logged
    into a closed file ("--- Logging error ---"). Each test gets the root logger back as it
    found it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)


@pytest.fixture
def started() -> Iterator[list[CliProcess]]:
    """The background ``pgbeat`` processes a test starts (``started.append(start_cli(...))``),
    killed when it ends, however it ends."""
    processes: list[CliProcess] = []
    yield processes
    for process in processes:
        process.stop(signal.SIGKILL)


@pytest.fixture
def run_worker(database_url: str) -> Iterator[Callable[..., pgbeat.Worker]]:
    """Start a worker in a thread on the test's database: ``run_worker(registry, **settings)``
    (``WorkerSettings`` fields; ``url=`` for another database). Every worker started is
    stopped when the test ends."""
    with contextlib.ExitStack() as stack:

        def start(registry: pgbeat.Registry, url: str | None = None, **settings: Any) -> Any:
            return stack.enter_context(running_worker(url or database_url, registry, **settings))

        yield start
