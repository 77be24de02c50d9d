"""The statements on no table: the database clock, the dashboard's ping and the
statement timeout of its pages."""

from __future__ import annotations

from typing import LiteralString

# The database's clock: the one time every replica agrees on.
DATABASE_NOW: LiteralString = "SELECT now()"

# /healthz: the database answers (no table).
UI_PING: LiteralString = "SELECT 1"

# The statement timeout of one page's transaction, behind a pooler that keeps no session.
UI_STATEMENT_TIMEOUT_LOCAL: LiteralString = """
SELECT set_config('statement_timeout', %(ms)s, true)"""
