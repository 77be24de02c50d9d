"""The ``pgbeat`` command: the parser, and main() turning every user error into one line.

Every user error (bad flag, bad JSON, bad duration, bad schedules file, unreachable
database) ends with one line on stderr and exit status 1; never a traceback. Each command
group lives in a module of its own and registers itself with ``add_commands``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import psycopg

from pgbeat.cli import jobs, queues, schedules, status, types, ui, worker, workflows
from pgbeat.cli.common import Parser, add_schema_flag
from pgbeat.db import pooler, schemas, urls
from pgbeat.errors import PgbeatError
from pgbeat.observe import logs

DESCRIPTION = """\
Background jobs and replica-safe cron schedules on the PostgreSQL you already run.

Run any number of schedulers and workers against one database: every period of a
schedule is enqueued exactly once, and workers claim due jobs with SKIP LOCKED.
Without DATABASE_URL (or --database-url), `pgbeat run` (the demo) and --embedded use an
embedded PostgreSQL under ./.pgbeat; every other command says that no database is configured.
"""

EPILOG = """\
examples:
  pgbeat run                                  the demo: migrate, schedule and work in one process
  pgbeat migrate                              create or upgrade the schema
  pgbeat scheduler --schedules schedules.toml
  pgbeat worker myapp.jobs:registry --concurrency 10
  pgbeat enqueue reminder --payload '{"user_id": 42}' --in 24h
  pgbeat schedules next daily_report --count 5
"""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="pgbeat",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    commands.required = True
    common = _common_flags()
    status.add_commands(commands, common)
    worker.add_commands(commands, common)
    jobs.add_commands(commands, common)
    schedules.add_commands(commands, common)
    queues.add_commands(commands, common)
    ui.add_commands(commands, common)
    workflows.add_commands(commands, common)
    return parser


def _common_flags() -> argparse.ArgumentParser:
    """The flags every command that talks to the database takes."""
    common = Parser(add_help=False)
    common.add_argument(
        "--database-url",
        metavar="URL",
        help="PostgreSQL URL (default: $DATABASE_URL; none: an error, but for `pgbeat run`)",
    )
    common.add_argument(
        "--embedded",
        action="store_true",
        help="without a database URL, start a throwaway PostgreSQL in ./.pgbeat "
        "($PGBEAT_HOME); for trying pgbeat out, never for production",
    )
    common.add_argument(
        "--pooler",
        choices=pooler.POOLER_MODES,
        help="'transaction' behind pgbouncer in transaction mode: no session state, workers "
        "poll (default: $PGBEAT_POOLER, else none)",
    )
    add_schema_flag(common)
    common.add_argument(
        "--log-level",
        default=os.environ.get("PGBEAT_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
    )
    common.add_argument(
        "--log-format",
        default=os.environ.get("PGBEAT_LOG_FORMAT", "text"),
        choices=["text", "json"],
        help="one line per event, as text or JSON (default text)",
    )
    return common


def _version() -> str:
    from pgbeat.version import __version__

    return f"pgbeat {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.configure(getattr(args, "log_level", "INFO"), getattr(args, "log_format", "text"))
    if getattr(args, "pooler", None):  # read by every connection, also in worker processes
        os.environ[pooler.POOLER_ENV] = args.pooler
    # Every error is scrubbed against the URL in use: libpq quotes pieces of a password
    # it misreads (an unescaped "@" turns its tail into the host name).
    url = getattr(args, "database_url", None) or os.environ.get("DATABASE_URL", "")
    embedded = getattr(args, "embedded", False) or args.command == "run"  # the demo: no server
    try:
        # --schema is read wherever a URL is resolved, also in worker processes
        with urls.embedded_allowed(embedded), schemas.named(getattr(args, "schema", None)):
            code: int = args.func(args)
    except (PgbeatError, ValueError) as exc:
        message = urls.scrub(types.one_line(str(exc)), url)
        print(f"pgbeat: error: {message}", file=sys.stderr)
        return 1
    except psycopg.Error as exc:  # a database error that is not the user's input
        message = urls.scrub(types.one_line(str(exc)), url)
        print(f"pgbeat: error: database error: {type(exc).__name__}: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `pgbeat jobs list --json | head`: the reader left, as it may
        # Python would report the pipe again when it flushes stdout at exit: point it away.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
