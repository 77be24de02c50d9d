"""Database URLs: which one to use (the flag, DATABASE_URL, or the embedded server where
that is allowed), checked for the mistakes libpq would misread, and kept out of logs
(``redact``, ``scrub``).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from collections.abc import Iterator
from urllib.parse import unquote

import psycopg

from pgbeat.db.embedded import embedded_url
from pgbeat.db.pooler import pooler
from pgbeat.db.schemas import with_schema
from pgbeat.errors import UserError

_embedded_allowed: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "pgbeat_embedded_allowed", default=False
)


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``, safe to log.

    Handles both forms libpq reads: ``postgresql://user:pw@host/db?password=pw`` and
    ``host=... password=...``, and passwords that libpq splits (an unescaped ``@`` or ``/``).
    """
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except (psycopg.Error, ValueError):  # ValueError: bytes that are not UTF-8
        return "<unparseable database url>"
    if "://" not in url:
        if not params.get("password"):
            return url
        return psycopg.conninfo.make_conninfo("", **{**params, "password": "***"})
    scheme, _, rest = url.partition("://")
    before_query, question, query = rest.partition("?")
    userinfo, at, location = before_query.rpartition("@")  # the last "@": as the user meant
    if ":" in userinfo:
        userinfo = userinfo.partition(":")[0] + ":***"
    if query:
        query = "&".join(
            "password=***" if pair.partition("=")[0] == "password" else pair
            for pair in query.split("&")
        )
    return f"{scheme}://{userinfo}{at}{location}{question}{query}"


# What ends the userinfo of a URL for libpq or for urllib: libpq takes what follows a
# password's first "@" as the host, or stops at a "/" and takes the rest as port and path.
_URL_SEPARATORS = re.compile(r"[@/?#]")


def _passwords(url: str) -> list[str]:
    """Every spelling of ``url``'s password, and every piece libpq may quote apart, longest first.

    ``postgresql://app:pa@ss@db/x`` connects to host ``ss@db`` with password ``pa``: its
    error ("failed to resolve host 'ss@db'") quotes the rest of the password.
    """
    found: set[str] = set()
    with contextlib.suppress(psycopg.Error, ValueError):
        found.add(str(psycopg.conninfo.conninfo_to_dict(url).get("password") or ""))
    if "://" in url:
        userinfo = url.partition("://")[2].partition("?")[0].rpartition("@")[0]
        raw = userinfo.partition(":")[2]
        found.update((raw, unquote(raw)))
        for separator in _URL_SEPARATORS.finditer(raw):
            found.update((raw[: separator.start()], raw[separator.end() :]))
    return sorted((p for p in found if p), key=len, reverse=True)


# A piece of a password this short is replaced only where it stands alone (between
# characters that are not letters or digits): anywhere, "a" would garble every word.
_SHORT_PIECE = 6


def scrub(message: str, url: str) -> str:
    """Remove the password of ``url`` (and any piece of it) from an error message."""
    for password in _passwords(url):
        if len(password) >= _SHORT_PIECE:
            message = message.replace(password, "***")
        else:
            alone = rf"(?<![A-Za-z0-9]){re.escape(password)}(?![A-Za-z0-9])"
            message = re.sub(alone, "***", message)
    return " ".join(message.split())


# Only `pgbeat run` and `--embedded` (the CLI's main, through ``embedded_allowed``) or
# PGBEAT_EMBEDDED=1 in the environment let a command without a database URL start the
# embedded server.
EMBEDDED_ENV = "PGBEAT_EMBEDDED"


NO_DATABASE = (
    "no database configured: set DATABASE_URL or pass --database-url "
    "(--embedded starts a throwaway local PostgreSQL in ./.pgbeat, for trying pgbeat out)"
)


def resolve_url(explicit: str | None) -> str:
    """``--database-url``, else ``DATABASE_URL``, else (when allowed) the embedded server's.

    A URL that cannot name a PostgreSQL database is refused in one line (``check_url``).
    With ``--schema`` (``PGBEAT_SCHEMA``) its sessions start in that schema (``with_schema``).
    """
    url = explicit or os.environ.get("DATABASE_URL")
    if not url:
        if not (_embedded_allowed.get() or os.environ.get(EMBEDDED_ENV) == "1"):
            raise UserError(NO_DATABASE)
        url = embedded_url()
    try:
        url.encode()
    except UnicodeEncodeError:  # undecodable bytes in argv or the environment
        raise UserError("the database URL is not valid UTF-8 text") from None
    check_url(url)
    return in_schema(url)


def in_schema(url: str) -> str:
    """``url`` in the configured schema (``with_schema``); unchanged behind a transaction
    pooler, which refuses startup options (the role's search_path names the schema)."""
    return url if pooler() is not None else with_schema(url)


@contextlib.contextmanager
def embedded_allowed(allowed: bool = True) -> Iterator[None]:
    """Within the block, ``resolve_url`` may fall back to the embedded server."""
    token = _embedded_allowed.set(allowed)
    try:
        yield
    finally:
        _embedded_allowed.reset(token)


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def check_url(url: str) -> None:
    """Refuse, in one line that quotes no password, a URL that libpq would misread.

    The usual pastes: SQLAlchemy's ``postgresql+psycopg://``, another database's scheme, and
    a password with an unencoded ``@`` (libpq then takes the rest of it as the host).
    """
    match = _SCHEME.match(url)
    if match is None:
        return  # a key=value connection string (host=... dbname=...): libpq's own syntax
    scheme = match.group(1).lower()
    if scheme.startswith(("postgresql+", "postgres+")):
        raise UserError(
            f"the database URL starts with {scheme}:// (an SQLAlchemy URL): pgbeat takes "
            f"libpq's, write postgresql:// instead"
        )
    if scheme not in ("postgresql", "postgres"):
        raise UserError(
            f"the database URL starts with {scheme}://: a PostgreSQL URL starts with "
            f"postgresql:// or postgres://"
        )
    authority = url[match.end() :].partition("?")[0].partition("#")[0]
    userinfo = authority.rpartition("@")[0]
    if "@" in userinfo:
        raise UserError(
            "the database URL has more than one '@': percent-encode an '@' in the user name "
            "or password as %40"
        )
    if ":" in userinfo and "/" in userinfo.partition(":")[2]:
        raise UserError("the password in the database URL contains '/': percent-encode it as %2F")
