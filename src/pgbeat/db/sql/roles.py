"""The statements about the least-privilege roles of docs/least-privilege.sql (shipped as
``pgbeat/db/roles.sql``): which group roles a database was set up with."""

from __future__ import annotations

from typing import LiteralString

# The role the worker's row-level policy on jobs names (pg_policy, one row): the
# deployment's name for pgbeat_worker, or no row when the roles were never set up.
ROLES_WORKER_GROUP: LiteralString = """
SELECT r.rolname FROM pg_policy AS p JOIN pg_roles AS r ON r.oid = ANY(p.polroles)
WHERE p.polname = 'pgbeat_jobs_worker' AND p.polrelid = to_regclass('jobs')
LIMIT 1"""
