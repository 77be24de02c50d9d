"""Hosts on one machine: network namespaces joined by a bridge, and a PostgreSQL on one of them.

Each host is a namespace with one veth pair into a bridge that lives in a namespace of its
own, so the machine's own network is never touched. Addresses come from 198.18.0.0/15, the
range set aside for network benchmark tests, and exist only inside these namespaces.
A link is cut by dropping every packet on both of its ends with iptables (silently, as a
failed switch would: TCP retransmits and waits) or by setting the bridge's port down.
The suite itself reaches the database through its unix socket, which no cut affects.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.helpers import CliProcess, cli_env

SUBNET = "198.18.0"
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=10)


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "network partitions need root (ip netns, iptables)"
    for tool in ("ip", "iptables", "setpriv"):
        if shutil.which(tool) is None:
            return f"network partitions need `{tool}`"
    if not (PG_BIN / "postgres").exists():
        return f"network partitions need PostgreSQL's server binaries in {PG_BIN}"
    probe = f"pgbt-probe-{uuid.uuid4().hex[:6]}"
    try:
        _ip("netns", "add", probe)
        _ip("-n", probe, "link", "add", "br0", "type", "bridge")
    except (subprocess.CalledProcessError, OSError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return f"`ip netns` is not usable here: {detail.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


@dataclass(frozen=True)
class Host:
    name: str
    namespace: str
    address: str
    port: str  # the bridge's side of the host's veth pair

    def command(self, args: Sequence[str]) -> list[str]:
        """``args`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *args]


class Network:
    """A bridge and the hosts plugged into it; ``cut`` and ``restore`` their links."""

    def __init__(self) -> None:
        self._tag = uuid.uuid4().hex[:6]
        self._bridge = f"pgbt-{self._tag}-br"
        self.hosts: dict[str, Host] = {}
        self._cut: dict[str, str] = {}
        _ip("netns", "add", self._bridge)
        _ip("-n", self._bridge, "link", "set", "lo", "up")
        _ip("-n", self._bridge, "link", "add", "br0", "type", "bridge")
        _ip("-n", self._bridge, "link", "set", "br0", "up")

    def add_host(self, name: str) -> Host:
        """A new namespace with ``lo`` and an ``eth0`` on the bridge."""
        number = len(self.hosts) + 1
        host = Host(name, f"pgbt-{self._tag}-{name}", f"{SUBNET}.{number}", f"p{number}")
        _ip("netns", "add", host.namespace)
        _ip(
            "link", "add", host.port, "netns", self._bridge, "type", "veth",
            "peer", "name", "eth0", "netns", host.namespace,
        )  # fmt: skip
        _ip("-n", self._bridge, "link", "set", host.port, "master", "br0", "up")
        _ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0")
        _ip("-n", host.namespace, "link", "set", "eth0", "up")
        _ip("-n", host.namespace, "link", "set", "lo", "up")
        self.hosts[name] = host
        return host

    def cut(self, name: str, mode: str = "drop") -> None:
        """Cut ``name`` off from every other host (``drop``: silently; ``down``: no carrier)."""
        host = self.hosts[name]
        if mode == "down":
            _ip("-n", self._bridge, "link", "set", host.port, "down")
        else:
            self._iptables(host, "-A")
        self._cut[name] = mode

    def restore(self, name: str) -> None:
        host = self.hosts[name]
        mode = self._cut.pop(name)
        if mode == "down":
            _ip("-n", self._bridge, "link", "set", host.port, "up")
        else:
            self._iptables(host, "-D")

    def _iptables(self, host: Host, action: str) -> None:
        """Drop what arrives at the host, and what it sends wherever that arrives."""
        rules = [(host.namespace, ["-i", "eth0"])] + [
            (other.namespace, ["-s", host.address])
            for other in self.hosts.values()
            if other.name != host.name
        ]
        for namespace, match in rules:
            subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    namespace,
                    "iptables",
                    action,
                    "INPUT",
                    *match,
                    "-j",
                    "DROP",
                ],
                check=True,
                capture_output=True,
                timeout=10,
            )

    def close(self) -> None:
        """Kill whatever still runs in the namespaces, then delete them."""
        namespaces = [host.namespace for host in self.hosts.values()] + [self._bridge]
        for namespace in namespaces:
            found = subprocess.run(
                ["ip", "netns", "pids", namespace], capture_output=True, text=True, check=False
            )
            for pid in found.stdout.split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
        for namespace in namespaces:
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)


class NetworkPostgres:
    """A PostgreSQL of its own, on ``host``'s address and on a unix socket for the suite."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.directory = Path(tempfile.mkdtemp(prefix="pgbeat-netns-pg-"))
        account = pwd.getpwnam("postgres")
        os.chown(self.directory, account.pw_uid, account.pw_gid)
        self._data = self.directory / "data"
        self._as_postgres(
            [str(PG_BIN / "initdb"), "-D", str(self._data), "-U", "postgres", "-A", "trust"]
        )
        with open(self._data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {SUBNET}.0/24 trust\n")
        self._process: subprocess.Popen[bytes] | None = None
        self.start()

    def _as_postgres(self, args: list[str]) -> None:
        subprocess.run(
            ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", *args],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def start(self) -> None:
        settings = {
            "listen_addresses": self.host.address,
            "port": "5432",
            "unix_socket_directories": str(self.directory),
            "fsync": "off",
            "max_connections": "300",
            "log_min_messages": "warning",
        }
        options = [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
        as_postgres = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
        server = [*as_postgres, str(PG_BIN / "postgres"), "-D", str(self._data)]
        with open(self.directory / "log", "ab") as log:  # the server keeps its own copy
            self._process = subprocess.Popen(
                self.host.command([*server, *options]), stdout=subprocess.DEVNULL, stderr=log
            )
        deadline = time.monotonic() + 60
        while not self._accepts_connections():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the namespace's PostgreSQL did not start: " + self.log())
            time.sleep(0.05)

    def _accepts_connections(self) -> bool:
        try:
            psycopg.connect(self.local_url(), connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    def log(self) -> str:
        return (self.directory / "log").read_text(errors="replace")[-3000:]

    def url(self, database: str = "postgres") -> str:
        """The URL the hosts use: through the bridge."""
        return f"postgresql://postgres@{self.host.address}:5432/{database}"

    def local_url(self, database: str = "postgres") -> str:
        """The URL the suite uses: the unix socket, which no cut affects."""
        return f"postgresql://postgres@/{database}?host={self.directory}"

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGQUIT)  # immediate shutdown
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def start_on(host: Host, args: Sequence[str], database_url: str, **env: str) -> CliProcess:
    """``pgbeat ARGS`` running on ``host`` (its output collected), told which host it is."""
    command = host.command([sys.executable, "-m", "pgbeat", *args])
    environment = cli_env(database_url, PGBEAT_TEST_HOST=host.name, **env)
    return CliProcess(command, environment, str(Path(__file__).resolve().parents[2]))
