"""The statements on no table: the database clock, the dashboard's ping and the
statement timeout of its pages."""

from __future__ import annotations

from typing import LiteralString

# Ends a transaction a failed statement left open, on a connection in autocommit. A limited
# queue's claim needs no BEGIN or COMMIT: its statements run in the implicit transaction of
# one simple query or of a pipeline (worker/locked_claim.py says why; psycopg's
# transaction() in a pipeline syncs before COMMIT, a second round trip per claim).
TRANSACTION_ROLLBACK: LiteralString = "ROLLBACK"

# Keeps a statement by name for the session (db/named_statements.py fills in its name,
# its parameters' types, as " (text, int)" or nothing, and its text with $n placeholders).
SESSION_PREPARE: LiteralString = "PREPARE {name}{types} AS {text}"

# Runs a statement kept by name (db/named_statements.py): its values follow in
# parentheses, as literals, when it takes any.
SESSION_EXECUTE: LiteralString = "EXECUTE {name}"

# The database's clock: the one time every replica agrees on.
DATABASE_NOW: LiteralString = "SELECT now()"

# /healthz: the database answers (no table).
UI_PING: LiteralString = "SELECT 1"

# The statement timeout of one page's transaction, behind a pooler that keeps no session.
UI_STATEMENT_TIMEOUT_LOCAL: LiteralString = """
SELECT set_config('statement_timeout', %(ms)s, true)"""

# The schema unqualified names resolve to first (--schema puts it first on search_path):
# NULL when no schema of the path exists.
SESSION_SCHEMA: LiteralString = "SELECT current_schema()"

# The transaction's isolation level: pgbeat.wait refuses a fixed snapshot (repeatable read,
# serializable), in which a job never changes however long it waits.
TRANSACTION_ISOLATION: LiteralString = "SELECT current_setting('transaction_isolation')"
