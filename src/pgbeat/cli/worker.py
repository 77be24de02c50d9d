"""``pgbeat worker APP``: run the handlers of a registry, in one process or under a supervisor."""

from __future__ import annotations

import argparse
from typing import Any

from pgbeat.cli import common, types
from pgbeat.db import urls
from pgbeat.durations import format_duration
from pgbeat.errors import UserError
from pgbeat.observe import logs
from pgbeat.worker import supervisor
from pgbeat.worker.retention_policy import format_retention
from pgbeat.worker.worker import Worker

MAX_PORT = 65535
# Flags a supervisor does not pass on as such: it resolves the URL once and hands it over
# in the environment (a password on a command line shows in `ps`; --embedded is spent by
# then), --pooler and --schema travel in PGBEAT_POOLER and PGBEAT_SCHEMA, and a child
# never supervises.
NOT_FORWARDED = frozenset({"database_url", "embedded", "pooler", "schema", "processes", "help"})


def add_commands(commands: Any, common_flags: argparse.ArgumentParser) -> None:
    p = commands.add_parser("worker", parents=[common_flags], help="run jobs")
    p.add_argument(
        "app",
        metavar="APP",
        help="the handler registry, as module:attribute (the current directory is searched "
        "after the installed packages)",
    )
    common.add_worker_flags(p)
    common.add_retention_flags(p)
    common.add_metrics_flags(p)
    p.add_argument(
        "--processes",
        type=types.positive_int,
        default=1,
        metavar="N",
        help="run N worker processes to use N cores (default 1)",
    )
    p.set_defaults(func=cmd_worker, job_logs="failures")  # thousands a second: no line each


def cmd_worker(args: argparse.Namespace) -> int:
    parent = supervisor.supervisor_pid()
    if parent is not None and args.processes > 1:
        raise UserError("--processes cannot be given to a worker process started by --processes")
    _check_metrics_ports(args)
    logs.job_lines(every=args.job_logs == "all")
    registry = common.load_registry(args.app)
    url = urls.resolve_url(args.database_url)
    common.check_database(url)
    if args.processes > 1:
        return supervisor.run_supervised(
            lambda index: child_arguments(args, index), args.processes, url
        )
    worker = Worker(
        url,
        registry,
        common.worker_settings(args),
        metrics=common.start_metrics(args, url, registry.kinds()),
    )
    if parent is not None:
        supervisor.watch_supervisor(parent, worker.stop)
    with common.stop_on_signals([worker.stop]):
        worker.run()
    return 0


def child_arguments(args: argparse.Namespace, index: int) -> list[str]:
    """Worker process ``index``'s command line (after ``pgbeat``), from the parsed settings.

    Built, never edited from the parent's argv: what the parent's parser understood is
    what each child gets, with its own metrics port (the parent's plus ``index``).
    """
    arguments = [
        "worker",
        args.app,
        "--concurrency", str(args.concurrency),
        "--grace", format_duration(args.grace),
        "--poll", format_duration(args.poll),
        "--log-level", args.log_level,
        "--log-format", args.log_format,
        "--job-logs", args.job_logs,
    ]  # fmt: skip
    if args.lease is not None:
        arguments += ["--lease", format_duration(args.lease)]
    if args.timeout is not None:
        arguments += ["--timeout", format_duration(args.timeout)]
    if args.kinds is not None:
        arguments += ["--kinds", ",".join(args.kinds)]
    if args.queues is not None:
        arguments += ["--queues", ",".join(args.queues)]
    if args.metrics_port is not None:
        arguments += ["--metrics-port", str(args.metrics_port + index)]
        arguments += ["--metrics-host", args.metrics_host]
    arguments += [
        "--retention", format_retention(args.retention),
        "--failed-retention", format_retention(args.failed_retention),
        "--retention-every", format_duration(args.retention_every),
    ]  # fmt: skip
    return arguments


def _check_metrics_ports(args: argparse.Namespace) -> None:
    if args.metrics_port is None:
        return
    last = args.metrics_port + args.processes - 1
    if last > MAX_PORT:
        raise UserError(
            f"--metrics-port {args.metrics_port} with --processes {args.processes} needs ports "
            f"up to {last}, beyond {MAX_PORT}"
        )
