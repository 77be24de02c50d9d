"""Two local PostgreSQL clusters in streaming replication, a primary to kill -9 and a standby
to promote, as Patroni or a managed service would fail over.

Debian's ``postgresql-15`` binaries (``PGBEAT_PG_BIN``, default /usr/lib/postgresql/15/bin):
``initdb``, ``pg_basebackup -R``, ``pg_ctl promote``. initdb refuses root, so as root the
clusters run as the ``postgres`` OS user (``runuser``), in a temporary directory it owns, on
free ports of 127.0.0.1 with trust authentication; ``close`` removes everything.
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
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg

from tests.helpers import wait_for

PG_BIN = Path(os.environ.get("PGBEAT_PG_BIN", "/usr/lib/postgresql/15/bin"))
OS_USER = "postgres"  # who runs the clusters when we are root


def unavailable_reason() -> str | None:
    """Why the clusters cannot run here, or None."""
    if not (PG_BIN / "initdb").exists():
        return f"no PostgreSQL binaries in {PG_BIN} (set PGBEAT_PG_BIN)"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return "running as root without runuser"
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            return f"running as root and there is no {OS_USER!r} user to run PostgreSQL"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Cluster:
    """One data directory and its server on 127.0.0.1:``port``."""

    def __init__(self, root: Path, name: str, port: int) -> None:
        self.root = root
        self.data = root / name
        self.port = port

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def run(self, *command: str) -> None:
        """A PostgreSQL binary, as the clusters' OS user."""
        prefix = ["runuser", "-u", OS_USER, "--"] if os.geteuid() == 0 else []
        done = subprocess.run(
            [*prefix, str(PG_BIN / command[0]), *command[1:]],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode:
            log = self.data / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{command[0]} failed: {done.stderr.strip()[-2000:]}\n{tail}")

    def configure(self, lines: list[str]) -> None:
        with (self.data / "postgresql.auto.conf").open("a") as conf:
            conf.write("\n".join(lines) + "\n")

    def start(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.data / "log"), "-w", "-t", "60",
                 "start")  # fmt: skip

    def promote(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")

    def stop(self, mode: str = "immediate") -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def pids(self) -> list[int]:
        """The postmaster and every process it started (read from /proc)."""
        pid_file = self.data / "postmaster.pid"
        if not pid_file.exists():
            return []
        postmaster = int(pid_file.read_text().split()[0])
        children = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                if int(fields[1]) == postmaster:
                    children.append(int(entry.name))
        return [postmaster, *children]

    def kill9(self, pids: list[int] | None = None) -> int:
        """SIGKILL the postmaster and all its processes at once (a crash); return how many.

        ``pids``: as ``pids()`` returned them just before, to kill without reading /proc.
        """
        pids = self.pids() if pids is None else pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

        def gone() -> bool:
            return not any(Path(f"/proc/{pid}").exists() for pid in pids)

        wait_for(gone, timeout=15, message="the killed cluster's processes to end")
        return len(pids)


@contextlib.contextmanager
def lone_cluster() -> Iterator[Cluster]:
    """One private cluster without a standby, for a scenario that stops and starts it
    (``Cluster.stop``/``start``) under real processes; removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="pgbeat-restart-"))
    if os.geteuid() == 0:
        shutil.chown(root, OS_USER)
    cluster = Cluster(root, "data", free_port())
    try:
        cluster.run("initdb", "-D", str(cluster.data), "-U", "postgres", "--auth=trust", "-N")
        cluster.configure(
            [
                "listen_addresses = '127.0.0.1'",
                f"port = {cluster.port}",
                f"unix_socket_directories = '{root}'",
                "shared_buffers = '64MB'",
                "max_connections = 100",
                "fsync = off",  # a stop is not a crash of the machine (ReplicatedPair says why)
            ]
        )
        cluster.start()
        yield cluster
    finally:
        if (cluster.data / "postmaster.pid").exists():
            cluster.stop("immediate")
        with contextlib.suppress(Exception):
            cluster.kill9()
        shutil.rmtree(root, ignore_errors=True)


class ReplicatedPair:
    """A primary and one streaming standby (synchronous or asynchronous), ready to use."""

    def __init__(self, *, synchronous: bool) -> None:
        self.synchronous = synchronous
        self.root = Path(tempfile.mkdtemp(prefix="pgbeat-failover-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, OS_USER)
        self.primary = Cluster(self.root, "primary", free_port())
        self.standby = Cluster(self.root, "standby", free_port())
        try:
            self._create()
        except BaseException:
            self.close()
            raise

    def _create(self) -> None:
        primary, standby = self.primary, self.standby
        primary.run("initdb", "-D", str(primary.data), "-U", "postgres", "--auth=trust", "-N")
        primary.configure(
            [
                "listen_addresses = '127.0.0.1'",
                f"port = {primary.port}",
                f"unix_socket_directories = '{self.root}'",
                "wal_level = replica",
                "max_wal_senders = 5",
                "wal_keep_size = '512MB'",
                "shared_buffers = '32MB'",
                "max_connections = 60",
                # a kill -9 loses what is not written to the kernel yet; fsync only matters
                # for a crash of the machine, which this harness does not simulate
                "fsync = off",
                "synchronous_standby_names = '\"standby\"'" if self.synchronous else "",
            ]
        )
        primary.start()
        standby.run("pg_basebackup", "-D", str(standby.data), "-h", "127.0.0.1",
                    "-p", str(primary.port), "-U", "postgres", "-X", "stream", "-R")  # fmt: skip
        standby.configure(
            [
                f"port = {standby.port}",
                # promoted, it has no standby of its own: commits must not wait for one
                # (pg_basebackup copied the primary's setting; Patroni would reset it too)
                "synchronous_standby_names = ''",
                f"primary_conninfo = 'host=127.0.0.1 port={primary.port} user=postgres "
                "application_name=standby'",
            ]
        )
        standby.start()
        state = "sync" if self.synchronous else "async"
        wait_for(
            lambda: self._replication_state() == state,
            timeout=30,
            interval=0.1,
            message=f"the standby to stream ({state})",
        )

    def _replication_state(self) -> str | None:
        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'"
                " AND state = 'streaming'"
            ).fetchone()
        return None if row is None else str(row[0])

    def url(self, database: str) -> str:
        """Both hosts, as an application configures them: libpq picks the writable one."""
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return f"postgresql://postgres@{hosts}/{database}?target_session_attrs=read-write"

    def standby_caught_up(self) -> bool:
        """The standby has replayed everything the primary has written so far."""
        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT replay_lsn >= pg_current_wal_lsn() FROM pg_stat_replication"
                " WHERE application_name = 'standby'"
            ).fetchone()
        return bool(row and row[0])

    def fail_over(self, when: Callable[[], bool] | None = None) -> float:
        """kill -9 the primary, as soon as ``when()`` is true if given; return the time of the
        kill (time.time())."""
        pids = self.primary.pids()
        if when is not None:
            wait_for(when, timeout=15, interval=0.001, message="the moment to kill")
        self.primary.kill9(pids)
        return time.time()

    def promote(self) -> float:
        """Promote the standby; return when it accepts writes (time.time())."""
        self.standby.promote()

        def writable() -> bool:
            with psycopg.connect(self.standby.url(), autocommit=True) as conn:
                row = conn.execute("SELECT NOT pg_is_in_recovery()").fetchone()
            return bool(row and row[0])

        wait_for(writable, timeout=30, interval=0.05, message="the promoted standby")
        return time.time()

    def close(self) -> None:
        for cluster in (self.primary, self.standby):
            if (cluster.data / "postmaster.pid").exists():
                cluster.stop("immediate")
            with contextlib.suppress(Exception):
                cluster.kill9()
        shutil.rmtree(self.root, ignore_errors=True)
