"""The least-privilege roles (docs/least-privilege.sql, shipped as ``roles.sql``): applied
by ``pgbeat roles``, and again by ``pgbeat migrate`` on a database set up with them, so an
upgrade that adds a column or a table never leaves a role unable to do its job.

The script is idempotent (every grant, policy and function is written again); group roles
may carry a suffix (``pgbeat_worker_blue``: two deployments on one server), which
``pgbeat migrate`` reads back from the worker's policy on ``jobs``.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import psycopg

from pgbeat.db.sql import roles as role_sql

GROUPS = ("enqueue", "keys", "worker", "scheduler", "ui_viewer", "ui_admin", "admin")
_GROUP_NAME = re.compile(r"\bpgbeat_(enqueue|keys|worker|scheduler|ui_viewer|ui_admin|admin)\b")
_SUFFIX = re.compile(r"[a-z0-9_]{0,40}")


def valid_suffix(suffix: str) -> bool:
    """Whether ``suffix`` may end a role name in the script (no quoting needed)."""
    return _SUFFIX.fullmatch(suffix) is not None


def roles_script(suffix: str = "") -> str:
    """The grants script, with every group role named ``pgbeat_<group><suffix>``."""
    if not _SUFFIX.fullmatch(suffix):
        raise ValueError("a role suffix is at most 40 of a-z, 0-9 and _")
    text = resources.files("pgbeat.db").joinpath("roles.sql").read_text(encoding="utf-8")
    return _GROUP_NAME.sub(lambda m: m.group(0) + suffix, text) if suffix else text


def deployed_suffix(conn: psycopg.Connection[Any]) -> str | None:
    """The suffix of the group roles this database was set up with ('' for the documented
    names), or None when it never was (no policy of the worker's on ``jobs``)."""
    row = conn.execute(role_sql.ROLES_WORKER_GROUP).fetchone()
    if row is None:
        return None
    name = str(row[0])
    suffix = name.removeprefix("pgbeat_worker")
    if name == suffix or not _SUFFIX.fullmatch(suffix):
        return None  # a policy pgbeat did not write: leave it to its author
    return suffix


def apply_roles(conn: psycopg.Connection[Any], suffix: str = "") -> None:
    """Run the grants script in one transaction (as a superuser, or the tables' owner
    holding CREATEROLE)."""
    with conn.transaction():
        conn.execute(roles_script(suffix).encode())  # a script: several statements
