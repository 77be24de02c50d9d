"""The embedded PostgreSQL (pgserver) behind the demo and the tests, kept private to its user.

It is for the demo and the tests, not for production: it trusts every connection that
reaches its socket, so only its owner may reach the socket. Run as root, pgserver starts
PostgreSQL as a ``pgserver`` system user and, when the data directory's path is too long
for a Unix socket, puts the socket in a directory it makes world-writable. Before handing
out a URL, ``embedded_url`` closes the data and socket directories (0700, owned by the
server's user) and refuses to go on if it cannot.
"""

from __future__ import annotations

import os
import stat
import sys
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pgbeat.errors import DatabaseUnavailable

EMBEDDED_DIR_ENV = "PGBEAT_HOME"
_servers: dict[Path, Any] = {}


def embedded_url(directory: Path | None = None) -> str:
    """Start (or reuse) the embedded PostgreSQL in ``directory`` and return its URL.

    ``directory`` defaults to ``$PGBEAT_HOME``, else ``./.pgbeat``. The server stops when
    the last pgbeat process using it exits; its data stays and is used on the next start.
    """
    directory = (directory or Path(os.environ.get(EMBEDDED_DIR_ENV, ".pgbeat"))).resolve()
    if directory not in _servers:
        server = _start(directory)
        make_private(Path(server.pgdata), socket_directory(str(server.get_uri())))
        _servers[directory] = server
        print(f"pgbeat: using the embedded PostgreSQL in {directory}", file=sys.stderr)
    return str(_servers[directory].get_uri())


def stop_embedded(directory: Path) -> None:
    """Stop the embedded server this process started in ``directory`` (tests use it)."""
    server = _servers.pop(directory.resolve(), None)
    if server is not None:
        server.cleanup()


def _start(directory: Path) -> Any:
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseUnavailable(
            f"cannot use {directory} for the embedded PostgreSQL ({EMBEDDED_DIR_ENV}): "
            f"{exc.strerror or exc}"
        ) from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pgserver warns about XDG_RUNTIME_DIR on servers
        import pgserver

        try:
            return pgserver.get_server(directory, cleanup_mode="stop")
        except Exception as exc:
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DatabaseUnavailable(
                f"could not start the embedded PostgreSQL in {directory}: {first_line}"
            ) from None


def socket_directory(url: str) -> Path | None:
    """The directory of the Unix socket a pgserver URL (``...?host=/dir``) points to."""
    hosts = parse_qs(urlsplit(url).query).get("host", [])
    return Path(hosts[0]) if hosts and hosts[0].startswith("/") else None


def make_private(data: Path, socket_dir: Path | None) -> None:
    """Make the data and socket directories 0700 and owned by the server's user, or refuse.

    The server's user owns the data directory (pgserver chowns it to ``pgserver`` when run
    as root). A socket directory others can enter lets any local user connect with trust
    authentication; one they can write lets them put a server of their own in its place.
    """
    owner = data.stat()
    for path in dict.fromkeys(p for p in (data, socket_dir) if p is not None):
        _close(path, owner.st_uid, owner.st_gid)


def _close(path: Path, uid: int, gid: int) -> None:
    try:
        found = path.stat()
        if found.st_uid != uid:
            os.chown(path, uid, gid)
        if stat.S_IMODE(found.st_mode) & 0o077:
            path.chmod(0o700)
        found = path.stat()
    except OSError as exc:
        raise DatabaseUnavailable(
            f"the embedded PostgreSQL's directory {path} is open to other users and pgbeat "
            f"cannot close it ({exc.strerror or exc}): remove it or set {EMBEDDED_DIR_ENV}"
        ) from None
    if found.st_uid != uid or stat.S_IMODE(found.st_mode) & 0o077:
        raise DatabaseUnavailable(f"the embedded PostgreSQL's directory {path} is not private")
