"""The fleet as every face shows it: live processes, the schedules file in effect and the
scheduler replicas behind it, the kinds no live worker claims, retention's turn.

Decided once here: ``pgbeat status`` (text and ``--json``) and the dashboard's processes
page only render a ``Fleet``. A process is live by ``liveness.is_live``'s rule (the SQL
takes the same ``STALE_AFTER``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from pgbeat import flow
from pgbeat.db.sql import processes as process_sql
from pgbeat.db.sql import retention as retention_sql
from pgbeat.db.sql import schedule_files as file_sql
from pgbeat.db.sql.jobs import actions as action_sql
from pgbeat.observe.liveness import STALE_AFTER

Unserved = tuple[str, str, int]  # kind, queue, pending jobs


@dataclass(frozen=True)
class Fleet:
    """What runs against the database, read at one moment."""

    processes: list[dict[str, Any]]  # live ones, by role, host and pid
    replicas: list[dict[str, Any]]  # live scheduler replicas and the file in effect
    unserved: list[Unserved]  # kinds of pending jobs that no live worker claims
    retention: dict[str, Any] | None  # retention's last round and who holds the turn

    @property
    def workers(self) -> list[dict[str, Any]]:
        return [p for p in self.processes if p["role"] == "worker"]

    @property
    def schedulers(self) -> list[dict[str, Any]]:
        return [p for p in self.processes if p["role"] == "scheduler"]

    @property
    def file_in_effect(self) -> str | None:
        """The hash of the schedules file in effect (applied last), once one was synced."""
        return self.replicas[0]["effect_hash"] if self.replicas else None

    @property
    def replicas_behind(self) -> list[dict[str, Any]]:
        """Live replicas holding another file than the one in effect (all of them when they
        disagree and none is in effect yet)."""
        if self.file_in_effect is None:
            return self.replicas if self.replicas_disagree else []
        return [r for r in self.replicas if not r["in_effect"]]

    @property
    def replicas_disagree(self) -> bool:
        """Whether live scheduler replicas run different schedules files."""
        hashes = {r["schedules_hash"] for r in self.replicas}
        if self.file_in_effect is None:
            return len(hashes) > 1
        return any(not r["in_effect"] for r in self.replicas)

    def file_warnings(self) -> list[str]:
        """Name the scheduler replicas whose schedules file is not the one in effect."""
        behind = self.replicas_behind
        if not behind:
            return []
        names = ", ".join(f"{r['host']}:{r['pid']} (file {r['schedules_hash']})" for r in behind)
        if self.file_in_effect is None:
            count = len({r["schedules_hash"] for r in self.replicas})
            return [f"schedulers run {count} different schedules files: {names}"]
        effect = self.replicas[0]
        return [
            f"scheduler replicas hold a different schedules file than the one in effect "
            f"({effect['effect_hash']}, applied by {effect['effect_applied_by']}): {names}; "
            "the newest file among live replicas wins"
        ]

    def files_json(self) -> dict[str, Any]:
        """The schedules file in effect and the replicas behind it, for ``--json``."""
        return {
            "in_effect": self.file_in_effect,
            "replicas_disagree": self.replicas_disagree,
            "replicas_behind": [
                {"host": r["host"], "pid": r["pid"], "schedules_hash": r["schedules_hash"]}
                for r in self.replicas_behind
            ],
        }

    def unserved_warnings(self) -> list[str]:
        return [
            f"no live worker claims kind {kind} in queue {queue} ({count} pending jobs wait)"
            for kind, queue, count in self.unserved
        ]


def read_fleet(conn: psycopg.Connection[Any]) -> Fleet:
    """The fleet now (four small reads: the processes table, files, pending kinds, retention)."""
    with conn.cursor(row_factory=dict_row) as cursor:
        params = {"stale_after": STALE_AFTER}
        processes = cursor.execute(process_sql.PROCESSES_LIST, params).fetchall()
        replicas = cursor.execute(file_sql.FILES_AGREEMENT, params).fetchall()
        retention = cursor.execute(retention_sql.RETENTION_STATUS).fetchone()
    pending = [tuple(row) for row in conn.execute(action_sql.JOBS_PENDING_KINDS)]
    for process in processes:  # the worker role writes them: odd values must not break a face
        process["details"] = flow.worker_details(process["details"])
    workers = [p["details"] for p in processes if p["role"] == "worker"]
    unserved = flow.unserved_kinds(pending, workers) if workers else []
    return Fleet(processes, replicas, unserved, retention)


def fresh_workers(conn: psycopg.Connection[Any], max_age: timedelta) -> int:
    """How many workers have beaten within ``max_age`` (``pgbeat health``'s verdict)."""
    row = conn.execute(process_sql.PROCESSES_FRESH_WORKERS, {"max_age": max_age}).fetchone()
    return int(row[0]) if row else 0
