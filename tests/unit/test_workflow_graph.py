"""The workflow page's read model (ui/workflow_graph.py): levels, rows and the laid-out graph,
from hand-written workflows and expectations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from pgbeat.jobs.workflows import WorkflowStep
from pgbeat.ui import workflow_graph as wg
from pgbeat.ui.workflow_graph import MAX_PER_LEVEL, NODE_HEIGHT, NODE_WIDTH

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
_ids = iter(range(1, 1_000_000))


def step(
    name: str,
    after: tuple[str, ...] = (),
    status: str = "pending",
    *,
    kind: str = "k",
    waiting: bool = False,
    run_at: datetime | None = None,
    started_at: datetime | None = None,
    finished_at: datetime | None = None,
    job_id: int | None = None,
) -> WorkflowStep:
    return WorkflowStep(
        name=name,
        job_id=next(_ids) if job_id is None else job_id,
        kind=kind,
        status=status,
        after=list(after),
        waiting=waiting,
        queue="default",
        attempts=0,
        last_error=None,
        finished_at=finished_at,
        run_at=run_at,
        started_at=started_at,
    )


DIAMOND = [
    step("a", status="done"),
    step("b", ("a",), "running"),
    step("c", ("a",), "done"),
    step("d", ("b", "c"), waiting=True),
]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([step("a")], {"a": 0}),
        ([step("a"), step("b", ("a",)), step("c", ("b",))], {"a": 0, "b": 1, "c": 2}),
        (DIAMOND, {"a": 0, "b": 1, "c": 1, "d": 2}),
        # the longest path decides: d waits for a directly and through b and c
        (
            [step("a"), step("b", ("a",)), step("c", ("b",)), step("d", ("a", "c"))],
            {"a": 0, "b": 1, "c": 2, "d": 3},
        ),
        ([step("a"), step("b"), step("c", ("a", "b"))], {"a": 0, "b": 0, "c": 1}),
        ([step("a"), step("b", ("a", "a"))], {"a": 0, "b": 1}),  # a parent named twice
        ([step("b", ("gone",))], {"b": 0}),  # a parent that is no step of the list
        ([step("x", ("y",)), step("y", ("x",))], {"x": 0, "y": 0}),  # a cycle stays put
    ],
)
def test_levels(steps: list[WorkflowStep], expected: dict[str, int]) -> None:
    assert wg.levels(steps) == expected


def test_rows_say_what_a_waiting_step_waits_for_and_never_a_queue_time() -> None:
    created = NOW - timedelta(hours=5)
    steps = [
        step("a", status="done", finished_at=NOW - timedelta(minutes=1)),
        step("b", ("a",), "running", started_at=NOW - timedelta(seconds=30), run_at=created),
        step("c", ("a",), run_at=NOW - timedelta(seconds=50)),  # released, due: queued
        step("d", ("a",), run_at=NOW + timedelta(hours=1)),  # released, due later
        step("e", ("a", "b", "c"), waiting=True),
        step("f", ("a",), "failed", finished_at=NOW),
    ]
    rows = {row.name: row for row in wg.step_rows(steps, NOW)}
    assert [row.name for row in wg.step_rows(steps, NOW)] == ["a", "b", "c", "d", "e", "f"]
    assert (rows["a"].state, rows["a"].since_label) == ("done", "ended")
    assert rows["a"].since_at == NOW - timedelta(minutes=1)
    assert (rows["b"].since_label, rows["b"].since_at) == ("started", NOW - timedelta(seconds=30))
    assert rows["c"].since_label == "in its queue since"
    assert rows["c"].since_at == NOW - timedelta(seconds=50)
    assert (rows["d"].since_label, rows["d"].since_at) == ("due", NOW + timedelta(hours=1))
    waiting = rows["e"]
    assert waiting.state == "waiting" and waiting.waits_for == ("b", "c")  # a is done
    assert waiting.since_at is None and waiting.since_label == "waits for its parents"
    assert rows["f"].waits_for == () and rows["f"].after == ("a",)


def test_a_diamond_is_drawn_left_to_right_with_its_states() -> None:
    drawn = wg.graph(7, DIAMOND)
    assert drawn.reason is None
    nodes = {node.label: node for node in drawn.nodes}
    assert [nodes[n].state for n in "abcd"] == ["done", "running", "done", "waiting"]
    assert nodes["d"].detail == "waits for 1 parent"  # b; c is done
    assert nodes["b"].detail == "running" and nodes["b"].title == "b (k): running"
    assert nodes["a"].href == f"/jobs/{DIAMOND[0].job_id}"
    assert nodes["a"].x < nodes["b"].x == nodes["c"].x < nodes["d"].x
    assert nodes["b"].y < nodes["c"].y  # in the order they were added
    assert nodes["a"].y == nodes["d"].y == (nodes["b"].y + nodes["c"].y) / 2  # centred
    gap = wg.COLUMN_GAP
    assert (drawn.width, drawn.height) == (
        2 * wg.MARGIN + 3 * NODE_WIDTH + 2 * gap,
        2 * wg.MARGIN + 2 * NODE_HEIGHT + wg.ROW_GAP,
    )
    # a->b and a->c ended (a done); b->d waits for b; c->d ended
    assert sorted(edge.ended for edge in drawn.edges) == [False, True, True, True]
    for edge in drawn.edges:
        start, end = edge.path.split(" C")[0], edge.path.rsplit(" ", 2)
        assert float(start[1:].split()[0]) < float(end[1])  # every arrow points right


def test_nodes_never_overlap_and_children_sit_near_their_parents() -> None:
    steps = [step("r1"), step("r2"), step("r3")]
    steps += [step("under-r3", ("r3",)), step("under-r1", ("r1",)), step("under-r2", ("r2",))]
    drawn = wg.graph(1, steps)
    nodes = {node.label: node for node in drawn.nodes}
    for parent in ("r1", "r2", "r3"):
        assert nodes[f"under-{parent}"].y == nodes[parent].y
    boxes = sorted((node.x, node.y) for node in drawn.nodes)
    for (x1, y1), (x2, y2) in pairwise(boxes):
        assert x1 != x2 or y2 - y1 >= NODE_HEIGHT + wg.ROW_GAP


def test_a_level_of_max_steps_is_drawn_whole_and_one_more_in_groups() -> None:
    root = step("root", status="done")
    whole = [root] + [step(f"c{i}", ("root",)) for i in range(MAX_PER_LEVEL)]
    assert len(wg.graph(1, whole).nodes) == MAX_PER_LEVEL + 1
    fan = [root]
    fan += [step(f"r{i}", ("root",), "done", kind="report") for i in range(9_990)]
    fan += [step(f"r{i}", ("root",), "running", kind="report") for i in range(9_990, 10_000)]
    fan += [step(f"m{i}", ("root",), "failed", kind="mail") for i in range(2)]
    lone = step("lone", ("root",), "done", kind="alone")  # a group of one: drawn as the step
    fan.append(lone)
    fan.append(step("summary", tuple(f"r{i}" for i in range(10_000)), waiting=True))
    drawn = wg.graph(42, fan)
    labels = [node.label for node in drawn.nodes]
    assert labels == ["root", "report (10,000)", "mail (2)", "lone", "summary"]
    assert drawn.nodes[3].href == f"/jobs/{lone.job_id}" and drawn.nodes[3].detail == "done"
    report, mail = drawn.nodes[1], drawn.nodes[2]
    assert report.state == "running" and report.detail == "10 running, 9,990 done"
    assert report.href == "/jobs?workflow=42&kind=report"
    assert mail.state == "failed" and mail.title == "2 steps of mail: 2 failed"
    assert drawn.nodes[4].detail == "waits for 10 parents"  # the running reports
    # one arrow per pair of boxes: root->report, ->mail, ->lone, report->summary (not done)
    assert sorted(edge.ended for edge in drawn.edges) == [False, True, True, True]


def test_a_level_of_too_many_kinds_is_one_group() -> None:
    steps = [step("root", status="done")]
    steps += [step(f"s{i}", ("root",), kind=f"kind{i}") for i in range(MAX_PER_LEVEL + 1)]
    drawn = wg.graph(3, steps)
    assert [node.label for node in drawn.nodes] == ["root", f"steps ({MAX_PER_LEVEL + 1})"]
    assert drawn.nodes[1].href == "/jobs?workflow=3"
    assert drawn.nodes[1].detail == f"{MAX_PER_LEVEL + 1} pending"


def test_long_names_are_cut_and_kinds_quoted_in_links() -> None:
    steps = [step("a" * 40)]
    steps += [step(f"s{i}", ("a" * 40,), kind="a&b c") for i in range(MAX_PER_LEVEL + 1)]
    drawn = wg.graph(5, steps)
    assert drawn.nodes[0].label == "a" * 19 + "…" and drawn.nodes[0].title.startswith("a" * 40)
    assert drawn.nodes[1].href == "/jobs?workflow=5&kind=a%26b%20c"


def test_nothing_is_drawn_when_empty_or_too_deep() -> None:
    assert wg.graph(1, []).reason == "This workflow has no steps left."
    chain = [step("s0")]
    chain += [step(f"s{i}", (f"s{i - 1}",)) for i in range(1, wg.MAX_LEVELS + 1)]
    deep = wg.graph(1, chain)
    assert deep.nodes == () and deep.reason is not None and "41 levels" in deep.reason
    assert wg.graph(1, chain[:-1]).reason is None
