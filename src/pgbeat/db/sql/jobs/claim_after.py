"""The claims that go on where the worker's last claim of the same statement stopped.

A claim leaves its rows' entries in the claim index it read (their status changed; a
partial index keeps an entry until VACUUM removes it), so the next claim, started from the
index's head, steps over every job claimed since the last vacuum: a drain of 20,000 jobs
read 19 index pages at its 100th claim of 10 and 127 at its 1,900th (220 beside 20,000
queues of delayed jobs, whose rows make the drained range's pages half full). Each twin here is
its claim with the position after the last row the worker took (``%(after_priority)s``,
``%(after_run_at)s``, ``%(after_id)s``) as the start of the index scan: the same priority,
later in (run_at, id). A job that could precede it is new (announced: the worker's next
claim starts from the head), of another priority (likewise), or made pending without a
notification (a lease reclaimed, a row a steering statement held at the last claim): the
worker starts from the head at least every worker/claim_cursor.py CURSOR_MAX seconds, so
such a job waits that much at most (docs/flow-control.md, "The claim's cursor").
"""

from __future__ import annotations

from typing import LiteralString

from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.db.sql.jobs import claim_heads as heads_sql
from pgbeat.db.sql.jobs import claim_limited as limited_sql

# The position after the last row taken, for an index ordered (..., priority DESC, run_at,
# id): equal priority, then a row comparison the index scan starts from (an index
# condition in the kept generic plan: tests/integration/test_worker_plans.py).
_AFTER: LiteralString = """
      AND priority = %(after_priority)s::smallint
      AND (run_at, id) > (%(after_run_at)s::timestamptz, %(after_id)s::bigint)"""

_DUE: LiteralString = "WHERE status = 'pending' AND run_at <= now()"
_DUE_AFTER: LiteralString = _DUE + _AFTER
_UNKEYED: LiteralString = "AND run_at <= now() AND limit_key IS NULL"
_UNKEYED_AFTER: LiteralString = _UNKEYED + _AFTER
_KEYED: LiteralString = "AND run_at <= now() AND limit_key IS NOT NULL"
_KEYED_AFTER: LiteralString = _KEYED + _AFTER

JOBS_CLAIM_AFTER: LiteralString = claim_sql.JOBS_CLAIM.replace(_DUE, _DUE_AFTER)
JOBS_CLAIM_SKIPPING_AFTER: LiteralString = claim_sql.JOBS_CLAIM_SKIPPING.replace(_DUE, _DUE_AFTER)
JOBS_CLAIM_ONE_HEAD_AFTER: LiteralString = heads_sql.JOBS_CLAIM_ONE_HEAD.replace(
    _UNKEYED, _UNKEYED_AFTER
)
JOBS_CLAIM_ONE_KEYED_HEAD_AFTER: LiteralString = heads_sql.JOBS_CLAIM_ONE_KEYED_HEAD.replace(
    _KEYED, _KEYED_AFTER
)

# A key-limited queue's head claim (claim_limited.py) on from the position, in each kind's
# head of both indexes: the worker keeps a position only after a claim that took every
# head row up to its last (no row of a saturated key passed over before it), so the rows
# before it are the ones it took (worker/limited_claims.py).
JOBS_CLAIM_LIMITED_HEAD_AFTER: LiteralString = limited_sql.JOBS_CLAIM_LIMITED_HEAD.replace(
    _UNKEYED, _UNKEYED_AFTER
).replace(_KEYED, _KEYED_AFTER)
assert JOBS_CLAIM_LIMITED_HEAD_AFTER.count("%(after_id)s") == 2

assert all(
    twin.count("%(after_id)s") == 1
    for twin in (
        JOBS_CLAIM_AFTER,
        JOBS_CLAIM_SKIPPING_AFTER,
        JOBS_CLAIM_ONE_HEAD_AFTER,
        JOBS_CLAIM_ONE_KEYED_HEAD_AFTER,
    )
)
