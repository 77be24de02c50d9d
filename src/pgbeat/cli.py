"""The ``pgbeat`` command: argument parsing, wiring, exit codes and one-line errors.

Every user error (bad flag, bad JSON, bad duration, bad schedules file, unreachable
database) ends with one line on stderr and exit status 1; never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import psycopg

from pgbeat import arguments, db, logs, migrate, queue
from pgbeat.errors import PgbeatError
from pgbeat.metrics import Metrics, PrometheusMetrics
from pgbeat.registry import Registry
from pgbeat.settings import WorkerSettings
from pgbeat.worker import Worker

log = logging.getLogger("pgbeat")

DEMO_APP = "pgbeat.demo:registry"


class UserError(PgbeatError):
    """Bad input on the command line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit status 1."""

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# -- the parser -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pgbeat", description=__doc__)
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    common = _Parser(add_help=False)
    common.add_argument(
        "--database-url",
        metavar="URL",
        help="PostgreSQL URL (default: $DATABASE_URL, else embedded in ./.pgbeat)",
    )
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

    p = commands.add_parser("migrate", parents=[common], help="create or upgrade the schema")
    p.add_argument(
        "--print",
        action="store_true",
        dest="print_sql",
        help="print the SQL instead of applying it",
    )
    p.set_defaults(func=cmd_migrate)

    p = commands.add_parser("worker", parents=[common], help="run jobs")
    p.add_argument("app", metavar="APP", help="the handler registry, as module:attribute")
    _add_worker_flags(p)
    _add_metrics_flags(p)
    p.add_argument(
        "--processes",
        type=arguments.positive_int,
        default=1,
        metavar="N",
        help="run N worker processes to use N cores (default 1)",
    )
    p.set_defaults(func=cmd_worker)

    p = commands.add_parser("enqueue", parents=[common], help="enqueue one job; prints its id")
    p.add_argument("kind", metavar="KIND")
    p.add_argument("--payload", type=arguments.json_payload, default={}, help="JSON (default {})")
    when = p.add_mutually_exclusive_group()
    when.add_argument(
        "--in",
        dest="delay",
        type=arguments.duration,
        metavar="DURATION",
        help="run after this delay, e.g. 24h",
    )
    when.add_argument(
        "--at",
        dest="run_at",
        type=arguments.aware_datetime,
        metavar="ISO-8601",
        help="run at this time, e.g. 2026-12-01T09:00:00+01:00",
    )
    p.add_argument("--unique-key", metavar="KEY")
    p.add_argument("--max-attempts", type=arguments.positive_int, metavar="N")
    p.set_defaults(func=cmd_enqueue)

    from pgbeat import cli_jobs, cli_ops, cli_schedules

    cli_schedules.add_commands(commands, common, _add_worker_flags, _add_metrics_flags)
    cli_jobs.add_commands(commands, common)
    cli_ops.add_commands(commands, common)
    return parser


def _add_worker_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--concurrency",
        type=arguments.positive_int,
        default=10,
        metavar="N",
        help="jobs run at once (default 10)",
    )
    p.add_argument(
        "--lease",
        type=arguments.duration,
        metavar="DURATION",
        help="how long a claimed job is reserved (default 5m)",
    )
    p.add_argument(
        "--timeout",
        type=arguments.duration,
        metavar="DURATION",
        help="a job's time limit, shorter than the lease (default 1m)",
    )
    p.add_argument("--kinds", type=arguments.kinds_list, metavar="a,b", help="only run these kinds")
    p.add_argument(
        "--grace",
        type=arguments.duration,
        default=timedelta(seconds=15),
        metavar="DURATION",
        help="on SIGTERM, how long running jobs may finish (default 15s)",
    )
    p.add_argument(
        "--poll",
        type=arguments.duration,
        default=timedelta(seconds=1),
        metavar="DURATION",
        help="polling interval when no notification arrives (default 1s)",
    )


def _add_metrics_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-port",
        type=arguments.positive_int,
        metavar="PORT",
        help="serve Prometheus metrics on this port",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address for --metrics-port (default 127.0.0.1)",
    )


def start_metrics(args: argparse.Namespace, url: str) -> Metrics | None:
    """Serve metrics when --metrics-port is given; None otherwise."""
    if args.metrics_port is None:
        return None
    metrics = PrometheusMetrics(url)
    try:
        metrics.serve(args.metrics_port, args.metrics_host)
    except OSError as exc:
        raise UserError(
            f"cannot serve metrics on {args.metrics_host}:{args.metrics_port}: {exc.strerror}"
        ) from None
    return metrics


def _version() -> str:
    from pgbeat import __version__

    return f"pgbeat {__version__}"


# -- commands ---------------------------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> int:
    if args.print_sql:
        sys.stdout.write(migrate.migration_script())
        return 0
    url = db.resolve_url(args.database_url)
    with db.translated_errors(url), db.connect(url) as conn:
        applied = migrate.apply_migrations(conn)
    for migration in applied:
        print(f"applied {migration.version:04d}_{migration.name}")
    if not applied:
        print("schema is up to date")
    return 0


def cmd_enqueue(args: argparse.Namespace) -> int:
    url = db.resolve_url(args.database_url)
    with db.translated_errors(url), db.connect(url) as conn:
        migrate.require_current_schema(conn)
        job_id = queue.enqueue(
            conn,
            args.kind,
            args.payload,
            run_at=args.run_at,
            delay=args.delay,
            unique_key=args.unique_key,
            max_attempts=args.max_attempts,
        )
    if job_id is None:
        print(
            f"a {args.kind} job with unique key {args.unique_key!r} already exists", file=sys.stderr
        )
        return 0
    print(job_id)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    registry = load_registry(args.app)
    url = db.resolve_url(args.database_url)
    check_database(url)
    if args.processes > 1:
        from pgbeat.supervisor import run_supervised

        return run_supervised(args.argv, args.processes, url)
    worker = Worker(url, registry, worker_settings(args), metrics=start_metrics(args, url))
    with stop_on_signals([worker.stop]):
        worker.run()
    return 0


def worker_settings(args: argparse.Namespace) -> WorkerSettings:
    try:
        return WorkerSettings(
            concurrency=args.concurrency,
            lease=args.lease,
            timeout=args.timeout,
            kinds=args.kinds,
            grace=args.grace,
            poll_interval=args.poll,
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None


def check_database(url: str) -> None:
    """Fail fast, in one line, when the database is unreachable or not migrated."""
    with db.translated_errors(url), db.connect(url) as conn:
        migrate.require_current_schema(conn)


def load_registry(spec: str) -> Registry:
    """Import ``module:attribute`` (from the current directory too) as a Registry."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise UserError(f"APP must be module:attribute, e.g. myapp.jobs:registry (got {spec!r})")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"cannot import {module_name!r}: {exc}") from None
    registry = getattr(module, attribute, None)
    if not isinstance(registry, Registry):
        raise UserError(f"{spec} is not a pgbeat.Registry (found {type(registry).__name__})")
    return registry


@contextlib.contextmanager
def stop_on_signals(stoppers: Sequence[Callable[[], None]]) -> Iterator[None]:
    """SIGTERM/SIGINT call every stopper (a second signal asks them to hurry)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, _frame: Any) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        for stop in stoppers:
            stop()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# -- entry point ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    logs.configure(getattr(args, "log_level", "INFO"), getattr(args, "log_format", "text"))
    try:
        code: int = args.func(args)
    except (PgbeatError, ValueError) as exc:
        print(f"pgbeat: error: {arguments.one_line(str(exc))}", file=sys.stderr)
        return 1
    except psycopg.Error as exc:  # a database error that is not the user's input
        message = db.scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else "", "")
        print(f"pgbeat: error: database error: {type(exc).__name__}: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


def now_utc() -> datetime:
    """The local clock, for previews only: the scheduler takes time from the database."""
    return datetime.now(UTC)


if __name__ == "__main__":
    sys.exit(main())
