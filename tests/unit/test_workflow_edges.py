"""The edges' parameters of a workflow's insert: which edge is ``sole`` (the child's only
parent, no run time asked), which lets the advance release the child without reading its
step row (migrations/0031_workflow_lookups.sql)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pgbeat
from pgbeat.jobs.workflow_definition import insert_params


def _edges(flow: pgbeat.Workflow) -> list[tuple[int, int, bool]]:
    _, _, edges = insert_params(flow)
    return list(zip(edges["parents"], edges["children"], edges["sole"], strict=True))


def test_a_fan_out_s_children_are_sole_and_its_summary_is_not() -> None:
    flow = pgbeat.Workflow()
    root = flow.add("root")
    reports = [flow.add("report", {"n": n}, after=root) for n in range(3)]
    flow.add("summary", after=reports)
    assert _edges(flow) == [
        (0, 1, True), (0, 2, True), (0, 3, True),
        (1, 4, False), (2, 4, False), (3, 4, False),
    ]  # fmt: skip


def test_a_child_that_asked_a_run_time_is_never_sole() -> None:
    flow = pgbeat.Workflow()
    root = flow.add("root")
    flow.add("later", after=root, delay=timedelta(seconds=5))
    flow.add("at", after=root, run_at=datetime(2030, 1, 1, tzinfo=UTC))
    flow.add("no_delay", after=root, delay=timedelta(0))
    assert _edges(flow) == [(0, 1, False), (0, 2, False), (0, 3, True)]


def test_a_workflow_without_edges_has_none() -> None:
    flow = pgbeat.Workflow()
    flow.add("alone")
    assert _edges(flow) == []
