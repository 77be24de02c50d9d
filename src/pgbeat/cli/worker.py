"""``pgbeat worker APP``: run the handlers of a registry, in one process or under a supervisor."""

from __future__ import annotations

import argparse
from typing import Any

from pgbeat.cli import common, types
from pgbeat.db import connections
from pgbeat.worker.worker import Worker


def add_commands(commands: Any, common_flags: argparse.ArgumentParser) -> None:
    p = commands.add_parser("worker", parents=[common_flags], help="run jobs")
    p.add_argument("app", metavar="APP", help="the handler registry, as module:attribute")
    common.add_worker_flags(p)
    common.add_metrics_flags(p)
    p.add_argument(
        "--processes",
        type=types.positive_int,
        default=1,
        metavar="N",
        help="run N worker processes to use N cores (default 1)",
    )
    p.set_defaults(func=cmd_worker)


def cmd_worker(args: argparse.Namespace) -> int:
    registry = common.load_registry(args.app)
    url = connections.resolve_url(args.database_url)
    common.check_database(url)
    if args.processes > 1:
        from pgbeat.worker.supervisor import run_supervised

        return run_supervised(args.argv, args.processes, url)
    worker = Worker(
        url, registry, common.worker_settings(args), metrics=common.start_metrics(args, url)
    )
    with common.stop_on_signals([worker.stop]):
        worker.run()
    return 0
