"""The workflow page's read model: each step's row (what it waits for, or since when it
queues) and the graph of the steps, laid out on the server.

Pure: a workflow's steps and the database clock in, plain values out; the template draws
them and computes nothing. A step's level is its longest path from a root, so every edge
points right; within a level, steps sit near their parents (the mean of their places).
A level of more than MAX_PER_LEVEL steps is drawn as groups (by kind and parents, or one
group for the level), so a fan-out of 10,000 steps is three boxes, not 10,002.

A step held for its parents ``waits for`` them: it is not in any queue, and its row and box
say whom it waits for, never how long (River #1185: a wait for parents read as queue delay
misleads). A released step is in its queue since it became due.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from urllib.parse import quote

NODE_WIDTH, NODE_HEIGHT = 150.0, 44.0
COLUMN_GAP, ROW_GAP, MARGIN = 40.0, 14.0, 4.0
MAX_PER_LEVEL = 8  # more steps than this in one level are drawn as groups
MAX_LEVELS = 40  # a deeper workflow is not drawn (its table lists every step)
LABEL_CHARACTERS = 20  # a longer name is cut in its box (whole in its tooltip)
# A group's colour: the status that most needs an operator's eye among its steps.
URGENCY = ("failed", "running", "pending", "waiting", "cancelled", "done")


class WorkflowStep(Protocol):
    """What is read of a step (pgbeat.jobs.workflows.WorkflowStep has it)."""

    @property
    def name(self) -> str: ...
    @property
    def job_id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def after(self) -> list[str]: ...
    @property
    def waiting(self) -> bool: ...
    @property
    def run_at(self) -> datetime | None: ...
    @property
    def started_at(self) -> datetime | None: ...
    @property
    def finished_at(self) -> datetime | None: ...


@dataclass(frozen=True)
class StepRow:
    """One step as the table shows it: its state, and ``since_label``/``since_at`` (when it
    queues, runs, ended) or ``waits_for`` (the parents that have not ended done)."""

    name: str
    job_id: int
    kind: str
    state: str  # waiting, pending, running, done, failed, cancelled
    after: tuple[str, ...]
    waits_for: tuple[str, ...]
    since_label: str
    since_at: datetime | None


@dataclass(frozen=True)
class Node:
    """A box of the graph: one step, or a group of steps of one level."""

    key: str  # unique on the page (an SVG id)
    label: str  # the step's name (cut), or "kind (N)" for a group
    title: str  # the whole text, for the tooltip and screen readers
    state: str  # the step's state, or a group's most urgent one
    detail: str  # the second line: the state, "waits for 2 parents", "9,990 done, 10 running"
    href: str  # under the dashboard's base: the step's job, or the group's jobs
    x: float
    y: float


@dataclass(frozen=True)
class Edge:
    """A parent -> child arrow; ``ended`` when every parent it stands for ended done."""

    path: str  # an SVG path, right side of the parent to left side of the child
    ended: bool


@dataclass(frozen=True)
class Graph:
    """The drawing: its size, boxes and arrows; ``reason`` says why nothing is drawn."""

    width: float
    height: float
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    reason: str | None = None
    node_width: float = NODE_WIDTH
    node_height: float = NODE_HEIGHT


def state_of(step: WorkflowStep) -> str:
    """``waiting`` for a step held for its parents, else its job's status."""
    return "waiting" if step.waiting else step.status


def step_rows(steps: Sequence[WorkflowStep], now: datetime) -> list[StepRow]:
    """The table's rows, in the order the steps were added."""
    done = {step.name for step in steps if step.status == "done"}
    return [_row(step, done, now) for step in steps]


def _row(step: WorkflowStep, done: set[str], now: datetime) -> StepRow:
    state = state_of(step)
    waits_for = tuple(p for p in step.after if p not in done) if state == "waiting" else ()
    label, at = _since(step, state, now)
    after = tuple(step.after)
    return StepRow(step.name, step.job_id, step.kind, state, after, waits_for, label, at)


def _since(step: WorkflowStep, state: str, now: datetime) -> tuple[str, datetime | None]:
    """What the table says of the step's time: never a time for a step held for parents."""
    if state == "waiting":
        return "waits for its parents", None
    if state == "pending":
        if step.run_at is not None and step.run_at > now:
            return "due", step.run_at
        return "in its queue since", step.run_at
    if state == "running":
        return "started", step.started_at
    return "ended", step.finished_at


def levels(steps: Sequence[WorkflowStep]) -> dict[str, int]:
    """Each step's level: 0 for a root, else one more than its deepest parent.

    Parents that are not steps of the list (a step purged by hand) are ignored; a cycle,
    which enqueue_workflow cannot make, leaves its steps at the level they reached.
    """
    names = {step.name for step in steps}
    parents = {s.name: [p for p in dict.fromkeys(s.after) if p in names] for s in steps}
    children: dict[str, list[str]] = defaultdict(list)
    for name, found in parents.items():
        for parent in found:
            children[parent].append(name)
    waiting = {name: len(found) for name, found in parents.items()}
    level = dict.fromkeys(parents, 0)
    ready = [step.name for step in steps if waiting[step.name] == 0]
    while ready:
        name = ready.pop()
        for child in children[name]:
            level[child] = max(level[child], level[name] + 1)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    return level


def graph(workflow_id: int, steps: Sequence[WorkflowStep]) -> Graph:
    """The laid-out graph of a workflow's steps (in the order they were added)."""
    if not steps:
        return Graph(0.0, 0.0, (), (), reason="This workflow has no steps left.")
    level = levels(steps)
    depth = max(level.values()) + 1
    if depth > MAX_LEVELS:
        reason = f"{depth} levels deep: too deep to draw; the table lists every step."
        return Graph(0.0, 0.0, (), (), reason=reason)
    by_level: dict[int, list[WorkflowStep]] = defaultdict(list)
    for step in steps:
        by_level[level[step.name]].append(step)
    boxes: list[list[_Box]] = [_boxes(workflow_id, n, by_level[n]) for n in range(depth)]
    done = {step.name for step in steps if step.status == "done"}
    box_of = {step.name: box for column in boxes for box in column for step in box.steps}
    _order(boxes, box_of)
    tallest = max(len(column) for column in boxes)
    nodes = []
    for n, column in enumerate(boxes):
        offset = (tallest - len(column)) * (NODE_HEIGHT + ROW_GAP) / 2
        for row, box in enumerate(column):
            box.x = MARGIN + n * (NODE_WIDTH + COLUMN_GAP)
            box.y = MARGIN + offset + row * (NODE_HEIGHT + ROW_GAP)
            nodes.append(box.node(done))
    width = 2 * MARGIN + depth * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP
    height = 2 * MARGIN + tallest * (NODE_HEIGHT + ROW_GAP) - ROW_GAP
    return Graph(width, height, tuple(nodes), _edges(steps, box_of))


class _Box:
    """A node while it is placed: its steps, its place in the level, then its position."""

    def __init__(self, key: str, steps: list[WorkflowStep], href: str, group: str) -> None:
        self.key, self.steps, self.href, self.group = key, steps, href, group
        self.first = steps[0].job_id  # ties keep the order steps were added in
        self.place = 0.0
        self.x = self.y = 0.0

    def node(self, done: set[str]) -> Node:
        """The box as drawn; a waiting step's line counts its parents not yet done."""
        if len(self.steps) == 1:
            step = self.steps[0]
            state = state_of(step)
            waits = len(set(step.after) - done)
            detail = state if state != "waiting" else _waits_text(waits)
            title = f"{step.name} ({step.kind}): {detail}"
            return Node(self.key, _cut(step.name), title, state, detail, self.href, self.x, self.y)
        counts = Counter(state_of(step) for step in self.steps)
        state = next((s for s in URGENCY if counts[s]), "mixed")
        ordered = sorted(counts, key=lambda s: URGENCY.index(s) if s in URGENCY else len(URGENCY))
        detail = ", ".join(f"{counts[s]:,} {s}" for s in ordered)
        label = f"{self.group} ({len(self.steps):,})"
        title = f"{len(self.steps):,} steps of {self.group}: {detail}"
        return Node(self.key, _cut(label), title, state, detail, self.href, self.x, self.y)


def _waits_text(parents: int) -> str:
    return f"waits for {parents:,} parent{'s' if parents != 1 else ''}"


def _cut(text: str) -> str:
    return text if len(text) <= LABEL_CHARACTERS else text[: LABEL_CHARACTERS - 1] + "…"


def _boxes(workflow_id: int, level: int, steps: list[WorkflowStep]) -> list[_Box]:
    """A level's boxes: one per step, or groups when it holds more than MAX_PER_LEVEL."""
    if len(steps) <= MAX_PER_LEVEL:
        return [_step_box(step) for step in steps]
    groups: dict[tuple[str, tuple[str, ...]], list[WorkflowStep]] = defaultdict(list)
    for step in steps:
        groups[(step.kind, tuple(sorted(set(step.after))))].append(step)
    listing = f"/jobs?workflow={workflow_id}"
    if len(groups) > MAX_PER_LEVEL:
        return [_Box(f"l{level}", steps, listing, "steps")]
    return [
        _Box(f"l{level}g{n}", members, f"{listing}&kind={quote(kind, safe='')}", kind)
        if len(members) > 1
        else _step_box(members[0])
        for n, ((kind, _), members) in enumerate(groups.items())
    ]


def _step_box(step: WorkflowStep) -> _Box:
    return _Box(f"s{step.job_id}", [step], f"/jobs/{step.job_id}", step.kind)


def _order(boxes: list[list[_Box]], box_of: dict[str, _Box]) -> None:
    """Orders each level by the mean place of its boxes' parents (roots as added)."""
    for column in boxes:
        for box in column:
            places = [box_of[p].place for s in box.steps for p in s.after if p in box_of]
            box.place = sum(places) / len(places) if places else float(box.first)
        column.sort(key=lambda box: (box.place, box.first))
        for row, box in enumerate(column):
            box.place = float(row)


def _edges(steps: Sequence[WorkflowStep], box_of: dict[str, _Box]) -> tuple[Edge, ...]:
    """One arrow per pair of boxes joined by an edge; ``ended`` if all its parents are done."""
    ended: dict[tuple[str, str], bool] = {}
    status = {step.name: step.status for step in steps}
    for step in steps:
        for parent in step.after:
            if parent not in box_of:
                continue
            pair = (box_of[parent].key, box_of[step.name].key)
            ended[pair] = ended.get(pair, True) and status[parent] == "done"
    keyed = {box.key: box for box in box_of.values()}
    return tuple(Edge(_path(keyed[a], keyed[b]), done) for (a, b), done in ended.items())


def _path(parent: _Box, child: _Box) -> str:
    """A curve from the middle of the parent's right side to the child's left side."""
    x1, y1 = parent.x + NODE_WIDTH, parent.y + NODE_HEIGHT / 2
    x2, y2 = child.x, child.y + NODE_HEIGHT / 2
    middle = (x1 + x2) / 2
    return f"M{x1:g} {y1:g} C{middle:g} {y1:g} {middle:g} {y2:g} {x2 - 4:g} {y2:g}"
