"""A pgbouncer of the tests' own, in transaction pooling mode, in front of the test PostgreSQL.

Debian's ``pgbouncer`` package; it refuses to run as root, so as root it runs as the
``postgres`` user (``-u``). Every database of the server is reachable through it under its
own name (a ``*`` fallback entry), so each test's cloned database works unchanged.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from tests.helpers import free_port

BINARY = "pgbouncer"

INI = """\
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen_port}
unix_socket_dir =
auth_type = trust
auth_file = {directory}/users.txt
pool_mode = transaction
admin_users = {user}
default_pool_size = {pool_size}
max_client_conn = 1000
server_reset_query =
server_check_delay = 0
logfile = {directory}/pgbouncer.log
pidfile = {directory}/pgbouncer.pid
"""


def unavailable_reason(server_url: str) -> str | None:
    """Why these tests cannot run here (no pgbouncer, a server not on TCP), or None."""
    if shutil.which(BINARY) is None:
        return "pgbouncer is not installed (Debian package `pgbouncer`; .ci/run installs it)"
    parts = urlsplit(server_url)
    if not parts.scheme.startswith("postgres") or not parts.hostname:
        return "pgbouncer tests need DATABASE_URL with a TCP host (not a unix socket)"
    return None


class Pgbouncer:
    """One pgbouncer process; ``url(database_url)`` routes a server URL through it."""

    def __init__(self, server_url: str, pool_size: int = 20) -> None:
        parts = urlsplit(server_url)
        self._server_netloc = parts.netloc
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="pgbeat-pgbouncer-"))
        user = parts.username or "postgres"
        (self.directory / "users.txt").write_text(f'"{user}" ""\n')
        (self.directory / "pgbouncer.ini").write_text(
            INI.format(
                host=parts.hostname,
                port=parts.port or 5432,
                listen_port=self.port,
                directory=self.directory,
                pool_size=pool_size,
                user=user,
            )
        )
        self._as_user: list[str] = []
        if os.geteuid() == 0:  # "PgBouncer should not run as root"
            account = pwd.getpwnam("postgres")
            for path in [self.directory, *self.directory.iterdir()]:
                os.chown(path, account.pw_uid, account.pw_gid)
            self._as_user = ["-u", "postgres"]
        self._user = user
        self._process: subprocess.Popen[bytes] | None = None
        self.start()

    def url(self, database_url: str) -> str:
        """``database_url`` with its host and port replaced by this pgbouncer's."""
        parts = urlsplit(database_url)
        if parts.netloc != self._server_netloc:
            raise ValueError("a URL of another server")
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@127.0.0.1:{self.port}" if userinfo else f"127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def start(self, timeout: float = 10.0) -> None:
        """Start pgbouncer and wait until it accepts connections."""
        self._process = subprocess.Popen(
            [BINARY, *self._as_user, str(self.directory / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"pgbouncer did not start:\n{self.log()[-2000:]}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGINT) -> None:
        """Stop it: SIGINT waits for clients' transactions, SIGKILL is a crash."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(sig)
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._process = None

    def restart(self, sig: int = signal.SIGKILL) -> None:
        """Stop (by default a crash: every client loses its connection) and start again."""
        self.stop(sig)
        self.start()

    def console(self) -> psycopg.Connection[Any]:
        """A connection to pgbouncer's admin console (SHOW POOLS, SHOW STATS ...)."""
        console = f"postgresql://{self._user}@127.0.0.1:{self.port}/pgbouncer"
        return psycopg.connect(console, autocommit=True, prepare_threshold=None)

    @staticmethod
    def pools(console: psycopg.Connection[Any], database: str) -> dict[str, int]:
        """``database``'s SHOW POOLS counters (cl_active, sv_active, sv_idle ...), summed."""
        cursor = console.cursor(row_factory=psycopg.rows.dict_row)
        cursor.execute("SHOW POOLS")
        totals: dict[str, int] = {}
        for row in cursor.fetchall():
            if row["database"] == database:
                for name, value in row.items():
                    if isinstance(value, int):
                        totals[name] = totals.get(name, 0) + value
        return totals

    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
