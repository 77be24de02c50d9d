"""What the command modules share: flags, connecting, loading the app, signals, JSON output.

Nothing outside ``pgbeat.cli`` imports this module: it turns command-line values into the
library's objects and the library's errors into one-line messages.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, NoReturn

import psycopg

from pgbeat.cli import types
from pgbeat.db import connections, migrate, schemas
from pgbeat.errors import UserError
from pgbeat.observe.metrics import Metrics, PrometheusMetrics
from pgbeat.registry import Registry
from pgbeat.signals import handling_stop_signals
from pgbeat.worker.retention_policy import (
    DEFAULT_EVERY,
    DEFAULT_FAILED_RETENTION,
    DEFAULT_RETENTION,
    RetentionPolicy,
    parse_retention,
)
from pgbeat.worker.settings import WorkerSettings

log = logging.getLogger("pgbeat")

DEMO_APP = "pgbeat.demo:registry"


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit status 1, and no abbreviations."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(1, f"{self.prog}: error: {types.one_line(message)} (see {self.prog} --help)\n")


def add_schema_flag(p: argparse.ArgumentParser) -> None:
    """--schema: the schema of pgbeat's tables; main() passes it on as PGBEAT_SCHEMA."""
    p.add_argument(
        "--schema",
        type=types.schema_name,
        metavar="NAME",
        help="the schema of pgbeat's tables, for several apps in one database "
        "(default: $PGBEAT_SCHEMA, else the search_path's first: public)",
    )


def add_worker_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--concurrency",
        type=types.positive_int,
        default=10,
        metavar="N",
        help="jobs run at once (default 10)",
    )
    p.add_argument(
        "--lease",
        type=types.duration,
        metavar="DURATION",
        help="how long a claimed job is reserved between renewals: a dead worker's jobs "
        "run again about this long after it died (default 5m)",
    )
    p.add_argument(
        "--timeout",
        type=types.duration,
        metavar="DURATION",
        help="a job's time limit (default 1m); may exceed the lease, which is renewed",
    )
    p.add_argument(
        "--kinds",
        type=types.kinds_list,
        metavar="a,b",
        help="only run these kinds (default: the kinds the registry has handlers for)",
    )
    p.add_argument(
        "--queues",
        type=types.queues_list,
        metavar="a,b",
        help="only take jobs of these queues (default: every queue)",
    )
    p.add_argument(
        "--grace",
        type=types.duration,
        default=timedelta(seconds=15),
        metavar="DURATION",
        help="on SIGTERM, how long running jobs may finish (default 15s)",
    )
    p.add_argument(
        "--poll",
        type=types.duration,
        default=timedelta(seconds=1),
        metavar="DURATION",
        help="polling interval when no notification arrives (default 1s)",
    )
    p.add_argument(
        "--job-logs",
        choices=("failures", "all"),
        help="a line for every job (all), or only for those that did not succeed and a "
        "summary a minute (failures; `pgbeat worker`'s default, `pgbeat run`'s is all)",
    )


def add_retention_flags(p: argparse.ArgumentParser) -> None:
    """--retention, --failed-retention, --retention-every: how long finished jobs stay."""
    p.add_argument(
        "--retention",
        type=_retention,
        default=DEFAULT_RETENTION,
        metavar="DURATION|off",
        help="delete done and cancelled jobs this long after they finished (default 7d)",
    )
    p.add_argument(
        "--failed-retention",
        type=_retention,
        default=DEFAULT_FAILED_RETENTION,
        metavar="DURATION|off",
        help="delete failed jobs this long after they failed (default 30d)",
    )
    p.add_argument(
        "--retention-every",
        type=types.duration,
        default=DEFAULT_EVERY,
        metavar="DURATION",
        help="how often a worker looks for the retention turn, and its holder deletes "
        "(default 10s)",
    )


def _retention(text: str) -> timedelta | None:
    try:
        return parse_retention(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, or off") from None


def retention_policy(args: argparse.Namespace) -> RetentionPolicy:
    return RetentionPolicy(
        retention=args.retention,
        failed_retention=args.failed_retention,
        every=args.retention_every,
    )


def add_metrics_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-port",
        type=types.port,
        metavar="PORT",
        help="serve Prometheus metrics on this port",
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        metavar="HOST",
        help="address for --metrics-port (default 127.0.0.1)",
    )


def start_metrics(args: argparse.Namespace, url: str, kinds: Iterable[str] = ()) -> Metrics | None:
    """Serve metrics when --metrics-port is given; None otherwise.

    ``kinds`` get a ``kind`` label of their own; any other kind is labelled ``other``.
    """
    if args.metrics_port is None:
        return None
    metrics = PrometheusMetrics(url, kinds, schemas.configured_schema())
    try:
        metrics.serve(args.metrics_port, args.metrics_host)
    except OSError as exc:
        raise UserError(
            f"cannot serve metrics on {args.metrics_host}:{args.metrics_port}: {exc.strerror}"
        ) from None
    return metrics


def worker_settings(args: argparse.Namespace) -> WorkerSettings:
    try:
        return WorkerSettings(
            concurrency=args.concurrency,
            lease=args.lease,
            timeout=args.timeout,
            kinds=args.kinds,
            queues=args.queues,
            grace=args.grace,
            poll_interval=args.poll,
            retention=retention_policy(args),
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None


@contextlib.contextmanager
def migrated_database(url: str, *, timeout: float = 5.0) -> Iterator[psycopg.Connection[Any]]:
    """A connection to a reachable database whose schema is current, or a one-line error."""
    with connections.translated_errors(url), connections.connect(url, timeout=timeout) as conn:
        schemas.require_schema(conn)
        migrate.require_current_schema(conn)
        yield conn


def migrate_schema(conn: psycopg.Connection[Any]) -> list[migrate.Migration]:
    """``pgbeat migrate``'s work: the schema of --schema created when missing (said so),
    checked to be the session's, then migrated; returns the migrations applied."""
    schema = schemas.configured_schema()
    if schema is not None and migrate.create_schema(conn, schema):
        print(f"created schema {schema}")
    schemas.require_schema(conn)
    return migrate.apply_migrations(conn)


def check_database(url: str) -> None:
    """Fail fast, in one line, when the database is unreachable or not migrated."""
    with migrated_database(url):
        pass


def load_registry(spec: str) -> Registry:
    """Import ``module:attribute`` (from the current directory too) as a Registry.

    The current directory is searched after the installed packages, never before: a
    ``pgbeat.py`` or ``pgserver.py`` lying there must not replace what pgbeat imports.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute or module_name.startswith("."):  # "." is relative
        raise UserError(f"APP must be module:attribute, e.g. myapp.jobs:registry (got {spec!r})")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
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

    def stop(signum: int) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        for stopper in stoppers:
            stopper()

    with handling_stop_signals(stop):
        yield


def print_json(value: Any) -> None:
    """JSON for scripts: times as ISO-8601, durations as seconds."""
    print(json.dumps(value, indent=2, default=json_default))


def json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def now_utc() -> datetime:
    """The local clock, for previews only: the scheduler takes time from the database."""
    return datetime.now(UTC)
