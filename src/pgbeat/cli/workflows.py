"""``pgbeat workflows show|cancel``: one workflow's steps, and cancelling what has not ended.

Both present ``pgbeat.jobs.workflows`` (the API's ``pgbeat.workflow`` and
``pgbeat.cancel_workflow``) on an autocommit connection.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from typing import Any

from pgbeat.cli import common
from pgbeat.db import urls
from pgbeat.jobs import workflows
from pgbeat.jobs.workflows import WorkflowState


def add_commands(commands: Any, common_flags: argparse.ArgumentParser) -> None:
    group = commands.add_parser("workflows", help="show a workflow's steps; cancel a workflow")
    sub = group.add_subparsers(
        dest="workflows_command", metavar="COMMAND", parser_class=type(group)
    )
    sub.required = True
    p = sub.add_parser("show", parents=[common_flags], help="a workflow's steps and statuses")
    p.add_argument("id", type=_workflow_id, metavar="ID")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=cmd_show)
    p = sub.add_parser(
        "cancel", parents=[common_flags], help="cancel every step that has not ended"
    )
    p.add_argument("id", type=_workflow_id, metavar="ID")
    p.set_defaults(func=cmd_cancel)


def _workflow_id(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) < 2**63:
        raise argparse.ArgumentTypeError(f"a workflow id is a positive whole number, not {text!r}")
    return int(text)


def cmd_show(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        found = workflows.workflow(conn, args.id)
    if found is None:
        print(f"pgbeat: no workflow {args.id}", file=sys.stderr)
        return 1
    if args.json:
        common.print_json(as_json(found))
        return 0
    name = f" {found.name}" if found.name else ""
    key = f" key={found.key}" if found.key else ""
    counts = ", ".join(f"{n} {status}" for status, n in sorted(found.counts.items()))
    print(f"workflow {found.id}{name}{key}: {found.status} ({counts})")
    header = ["STEP", "JOB", "KIND", "STATUS", "AFTER"]
    rows = [
        [s.name, str(s.job_id), s.kind, "waiting" if s.waiting else s.status, ",".join(s.after)]
        for s in found.steps
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    for line in (header, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    return 0


def as_json(found: WorkflowState) -> dict[str, Any]:
    """A workflow as ``workflows show --json`` prints it."""
    return {
        "id": found.id,
        "name": found.name,
        "key": found.key,
        "created_at": found.created_at,
        "status": found.status,
        "counts": found.counts,
        "jobs": found.jobs,
        "steps": [asdict(step) for step in found.steps],
    }


def cmd_cancel(args: argparse.Namespace) -> int:
    url = urls.resolve_url(args.database_url)
    with common.migrated_database(url) as conn:
        done = workflows.cancel_workflow(conn, args.id)
    if done is None:
        print(f"pgbeat: no workflow {args.id}", file=sys.stderr)
        return 1
    print(
        f"workflow {args.id}: cancelled {done.cancelled} pending steps, "
        f"asked {done.stopping} running ones to stop"
    )
    return 0
