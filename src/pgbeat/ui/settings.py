"""The dashboard's settings and the rules that keep it safe to start.

Pure: ``check_bind`` decides whether a host may be served (a non-loopback address needs
a token), ``normalize_prefix`` makes ``--prefix`` values comparable.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from pgbeat.errors import UiError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", ""})


@dataclass(frozen=True)
class UiSettings:
    """Everything ``create_app`` needs; tokens are secrets and never printed."""

    database_url: str
    replica_url: str | None = field(default=None, repr=False)  # a standby, for pages only
    prefix: str = ""
    read_only: bool = False
    token: str | None = field(default=None, repr=False)
    viewer_token: str | None = field(default=None, repr=False)
    hide_payloads: bool = False
    allowed_hosts: tuple[str, ...] = ()
    any_host: bool = False  # a wildcard bind with a token and no --allowed-host
    refresh_seconds: int = 5
    statement_timeout_ms: int = 3000
    pool_size: int = 2
    secure_cookie: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.pool_size <= 2:
            raise UiError("the dashboard's pool holds 1 or 2 connections")
        if self.token is not None and len(self.token) < 16:
            raise UiError("the UI token must be at least 16 characters")
        if self.viewer_token is not None and self.token is None:
            raise UiError("a viewer token needs an admin token too (PGBEAT_UI_TOKEN)")
        if (
            self.viewer_token is not None
            and self.viewer_token.strip() == (self.token or "").strip()
        ):
            raise UiError(
                "the viewer token must differ from the admin token (it would grant admin)"
            )

    @property
    def auth_required(self) -> bool:
        return self.token is not None

    def host_allowed(self, host_header: str) -> bool:
        """Whether a request's Host names this server (refuses DNS-rebinding names)."""
        if self.any_host:
            return True
        name = host_name(host_header)
        return name in LOOPBACK_NAMES or name in {h.lower() for h in self.allowed_hosts}


def normalize_prefix(prefix: str | None) -> str:
    """``pgbeat/`` -> ``/pgbeat``; ``/`` and empty -> ``""``."""
    if not prefix:
        return ""
    parts = [part for part in prefix.split("/") if part]
    if any(part in {".", ".."} or not part.isprintable() for part in parts):
        raise UiError(f"bad --prefix {prefix!r}")
    return "/" + "/".join(parts) if parts else ""


def host_name(host_header: str) -> str:
    """The host part of a Host header, without its port, lower case."""
    value = host_header.strip().lower()
    if value.startswith("["):
        return value.partition("]")[0] + "]"
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def is_loopback(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1."""
    bare = host.strip("[]").lower()
    if bare == "localhost":
        return True
    try:
        return ipaddress.ip_address(bare).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to serve a non-loopback address without a token."""
    if token is None and not is_loopback(host):
        raise UiError(
            f"refusing to serve the dashboard on {host} without a token: "
            "set PGBEAT_UI_TOKEN or --token-file (or bind to 127.0.0.1)"
        )


def allowed_hosts_for(host: str, extra: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
    """The Host names to accept for a bind address, and whether any name is accepted.

    A wildcard bind (0.0.0.0) without ``--allowed-host`` accepts any name: it needs a
    token, and the session cookie, not the network, then guards every page.
    """
    names = tuple(h.lower() for h in extra)
    if host in WILDCARD_HOSTS:
        return names, not names
    return (*names, host.lower()), False
