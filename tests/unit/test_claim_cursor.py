"""The claim's cursor (worker/claim_cursor.py): where the last claim of one statement stopped,
kept while nothing says a job may precede it, and never longer than CURSOR_MAX after a claim
from the index's head. Times are plain numbers standing for monotonic seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

import pytest

from pgbeat.db.sql.jobs import claim as claim_sql
from pgbeat.db.sql.jobs import claim_after
from pgbeat.db.sql.jobs import claim_heads as heads_sql
from pgbeat.job import Job
from pgbeat.worker.claim_cursor import CURSOR_MAX, ClaimCursor, last_in_claim_order
from pgbeat.worker.claiming import TWINS

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def row(id: int, priority: int = 0, seconds: int = 0, run_at: bool = True) -> tuple[Any, ...]:
    """A claimed row in Job's order (what the worker's claim fetches); run_at NULL if not
    ``run_at`` (a date the claim could not return)."""
    values: list[Any] = list(
        Job(id, "noop", {}, 1, 3, T0 + timedelta(seconds=seconds), T0, None, "default", priority)
    )
    if not run_at:
        values[Job._fields.index("run_at")] = None
    return tuple(values)


def rows(*ids: int) -> list[tuple[Any, ...]]:
    return [row(i) for i in ids]


def test_the_last_row_in_claim_order_is_by_priority_first_then_run_at_then_id() -> None:
    taken = [row(9, priority=1, seconds=5), row(3, 0, 1), row(4, 0, 1), row(1, 0, 0)]
    assert last_in_claim_order(taken) == (0, T0 + timedelta(seconds=1), 4)
    assert last_in_claim_order([row(2, 5), row(1, -1)]) == (-1, T0, 1)
    assert last_in_claim_order([row(7, 3, 9), row(8, 2, 0)]) == (2, T0, 8)


def test_a_row_whose_run_at_could_not_be_read_leaves_no_position() -> None:
    assert last_in_claim_order([row(1), row(2, run_at=False)]) is None


def run(cursor: ClaimCursor, statement: LiteralString, params: dict[str, Any], now: float) -> str:
    """The statement the cursor gives for ``statement`` (its twin from claim_after.py)."""
    return cursor.statement(statement, TWINS.get(statement), params, now)


def claim(
    cursor: ClaimCursor,
    statement: LiteralString,
    taken: list[tuple[Any, ...]],
    limit: int,
    now: float,
    params: dict[str, Any] | None = None,
) -> str:
    """One claim through the cursor: the statement it ran (the twin or the given one)."""
    params = {} if params is None else params
    ran = run(cursor, statement, params, now)
    cursor.claimed(taken, limit, now, from_head=ran == statement)
    return ran


def test_the_first_claim_reads_from_the_head_and_a_full_one_leaves_its_position() -> None:
    cursor = ClaimCursor()
    assert claim(cursor, claim_sql.JOBS_CLAIM, rows(1, 2, 3), 3, 0.0) == claim_sql.JOBS_CLAIM
    params: dict[str, Any] = {"limit": 3}
    ran = run(cursor, claim_sql.JOBS_CLAIM, params, 0.01)
    assert ran == claim_after.JOBS_CLAIM_AFTER
    assert params == {"limit": 3, "after_priority": 0, "after_run_at": T0, "after_id": 3}


@pytest.mark.parametrize(
    "statement",
    [
        claim_sql.JOBS_CLAIM,
        claim_sql.JOBS_CLAIM_SKIPPING,
        heads_sql.JOBS_CLAIM_ONE_HEAD,
        heads_sql.JOBS_CLAIM_ONE_KEYED_HEAD,
    ],
)
def test_each_claim_with_a_twin_goes_on_through_it(statement: LiteralString) -> None:
    cursor = ClaimCursor()
    claim(cursor, statement, rows(1, 2), 2, 0.0)
    assert run(cursor, statement, {}, 0.01) == TWINS[statement]


@pytest.mark.parametrize(
    "statement", [claim_sql.JOBS_CLAIM_BY_QUEUE, heads_sql.JOBS_CLAIM_BY_QUEUE_KIND]
)
def test_a_claim_without_a_twin_always_reads_from_the_head_and_ends_the_position(
    statement: LiteralString,
) -> None:
    cursor = ClaimCursor()
    claim(cursor, claim_sql.JOBS_CLAIM, rows(1, 2), 2, 0.0)
    assert claim(cursor, statement, rows(3, 4), 2, 0.01) == statement
    assert run(cursor, statement, {}, 0.02) == statement
    assert run(cursor, claim_sql.JOBS_CLAIM, {}, 0.02) == claim_sql.JOBS_CLAIM


def test_a_short_claim_leaves_no_position() -> None:
    cursor = ClaimCursor()
    claim(cursor, claim_sql.JOBS_CLAIM, rows(1, 2), 3, 0.0)
    assert run(cursor, claim_sql.JOBS_CLAIM, {}, 0.01) == claim_sql.JOBS_CLAIM
    claim(cursor, claim_sql.JOBS_CLAIM, [], 0, 0.02)  # asked nothing: nothing to go on from
    assert run(cursor, claim_sql.JOBS_CLAIM, {}, 0.03) == claim_sql.JOBS_CLAIM


def test_another_head_reads_from_its_own_head() -> None:
    """The one head's claim is keyed by its queue and kind too."""
    cursor = ClaimCursor()
    one = heads_sql.JOBS_CLAIM_ONE_HEAD
    claim(cursor, one, rows(1, 2), 2, 0.0, {"queue": "mail", "kind": "noop"})
    assert run(cursor, one, {"queue": "mail", "kind": "send"}, 0.01) == one
    claim(cursor, one, rows(3, 4), 2, 0.01, {"queue": "mail", "kind": "noop"})
    assert run(cursor, one, {"queue": "api", "kind": "noop"}, 0.02) == one
    claim(cursor, one, rows(5, 6), 2, 0.02, {"queue": "mail", "kind": "noop"})
    twin = run(cursor, one, {"queue": "mail", "kind": "noop"}, 0.03)
    assert twin == claim_after.JOBS_CLAIM_ONE_HEAD_AFTER


def test_a_reset_sends_the_next_claim_to_the_head() -> None:
    cursor = ClaimCursor()
    claim(cursor, claim_sql.JOBS_CLAIM, rows(1, 2), 2, 0.0)
    cursor.reset()
    assert run(cursor, claim_sql.JOBS_CLAIM, {}, 0.01) == claim_sql.JOBS_CLAIM


def test_a_reset_during_a_claim_leaves_no_position_after_it() -> None:
    """Jobs announced while a claim ran (or the held queues changed under it): what it read
    may have missed them."""
    cursor = ClaimCursor()
    claim(cursor, claim_sql.JOBS_CLAIM, rows(1, 2), 2, 0.0)
    ran = run(cursor, claim_sql.JOBS_CLAIM, {}, 0.01)
    cursor.reset()
    cursor.claimed(rows(3, 4), 2, 0.01, from_head=ran == claim_sql.JOBS_CLAIM)
    assert run(cursor, claim_sql.JOBS_CLAIM, {}, 0.02) == claim_sql.JOBS_CLAIM


def test_a_chain_of_claims_from_a_position_ends_cursor_max_after_its_claim_from_the_head() -> None:
    cursor = ClaimCursor()
    claim(cursor, claim_sql.JOBS_CLAIM, rows(1, 2), 2, 0.0)  # from the head: the chain begins
    for now in (0.03, 0.06, 0.09):
        assert claim(cursor, claim_sql.JOBS_CLAIM, rows(3, 4), 2, now) != claim_sql.JOBS_CLAIM
    assert run(cursor, claim_sql.JOBS_CLAIM, {}, CURSOR_MAX) == claim_sql.JOBS_CLAIM


def test_a_claim_that_fell_back_to_the_head_begins_a_new_chain() -> None:
    """A claim from the position that came back short reads the head for the rest: the chain
    begins again there."""
    cursor = ClaimCursor()
    claim(cursor, claim_sql.JOBS_CLAIM, rows(1, 2), 2, 0.0)
    ran = run(cursor, claim_sql.JOBS_CLAIM, {}, 0.09)
    assert ran == claim_after.JOBS_CLAIM_AFTER
    cursor.claimed(rows(3, 4), 2, 0.09, from_head=True)
    assert run(cursor, claim_sql.JOBS_CLAIM, {}, 0.09 + CURSOR_MAX - 0.01) != (claim_sql.JOBS_CLAIM)
