"""``pgbeat ui``: serve the dashboard with uvicorn, safe by default.

It binds 127.0.0.1 unless told otherwise, and refuses any other address without a token
(``PGBEAT_UI_TOKEN`` or ``--token-file``). The web packages come with the ``ui`` extra and
are imported only when this command runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from pgbeat.cli import common, types
from pgbeat.db import urls
from pgbeat.errors import UserError

log = logging.getLogger("pgbeat.ui")

TOKEN_ENV = "PGBEAT_UI_TOKEN"
VIEWER_TOKEN_ENV = "PGBEAT_UI_VIEWER_TOKEN"


def add_commands(commands: Any, common_flags: argparse.ArgumentParser) -> None:
    p = commands.add_parser(
        "ui", parents=[common_flags], help="serve the web dashboard (needs the ui extra)"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=types.port, default=8080, help="port (default 8080)")
    p.add_argument(
        "--prefix", default="", metavar="PATH", help="serve under this path, e.g. /pgbeat"
    )
    p.add_argument(
        "--read-only", action="store_true", help="hide every action and refuse them with 403"
    )
    p.add_argument(
        "--token-file", metavar="FILE", help=f"file holding the login token (or ${TOKEN_ENV})"
    )
    p.add_argument(
        "--viewer-token-file",
        metavar="FILE",
        help=f"file holding a read-only token (or ${VIEWER_TOKEN_ENV})",
    )
    p.add_argument("--hide-payloads", action="store_true", help="never show job payloads")
    p.add_argument(
        "--secure-cookie",
        action="store_true",
        help="mark the session cookie Secure (behind a proxy that terminates TLS)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name the dashboard answers to besides loopback (repeatable)",
    )
    p.add_argument(
        "--replica-url",
        metavar="URL",
        help="a standby to read the pages from (actions always go to --database-url)",
    )
    p.add_argument(
        "--refresh",
        type=types.positive_int,
        default=5,
        metavar="SECONDS",
        help="live refresh interval of open pages (default 5)",
    )
    p.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from pgbeat.ui import UiSettings, create_app
        from pgbeat.ui.settings import allowed_hosts_for, check_bind, normalize_prefix
    except ImportError as exc:
        raise UserError(
            f"pgbeat ui needs the ui extra ({exc.name} is missing): pip install 'pgbeat[ui]'"
        ) from None
    token = _secret(args.token_file, TOKEN_ENV)
    viewer_token = _secret(args.viewer_token_file, VIEWER_TOKEN_ENV)
    check_bind(args.host, token)
    url = urls.resolve_url(args.database_url)
    common.check_database(url)
    replica = None
    if args.replica_url:
        replica = urls.resolve_url(args.replica_url)
        common.check_database(replica)
    allowed, any_host = allowed_hosts_for(args.host, tuple(args.allowed_host))
    settings = UiSettings(
        database_url=url,
        replica_url=replica,
        prefix=normalize_prefix(args.prefix),
        read_only=args.read_only,
        token=token,
        viewer_token=viewer_token,
        hide_payloads=args.hide_payloads,
        allowed_hosts=allowed,
        any_host=any_host,
        refresh_seconds=args.refresh,
        secure_cookie=args.secure_cookie,
    )
    if token is None:
        log.warning(
            "no token set: anyone who can reach %s:%d on this machine can %s",
            args.host,
            args.port,
            "see the dashboard" if args.read_only else "retry, cancel and delete jobs",
        )
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"pgbeat ui: http://{shown}:{args.port}{settings.prefix}/", file=sys.stderr)
    config = uvicorn.Config(
        create_app(settings=settings),
        host=args.host,
        port=args.port,
        log_level="warning",
        server_header=False,
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    server.run()
    return 0 if server.started else 1


def _secret(path: str | None, env: str) -> str | None:
    """A token from its file (first line) or its environment variable; None if neither."""
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
        if not text:
            raise UserError(f"{path} is empty")
        return text.splitlines()[0].strip()
    value = os.environ.get(env, "").strip()
    return value or None
