"""A workflow as code builds it: steps (jobs) and which steps each waits for, checked as
they are added, before any SQL, and turned into the parameters of the insert statements.

It shares the row checks of ``enqueue_many`` (jobs/rows.py): a step's job
fields go through the very checks ``enqueue`` runs, so a field ``enqueue`` learns is a field
a step takes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from pgbeat.db.literals import bool_array, number_array, text_array
from pgbeat.jobs import rows
from pgbeat.jobs.rows import NewJob

OnParentFailure = Literal["cancel", "run"]
ON_PARENT_FAILURE = ("cancel", "run")
# What a step may not take from enqueue's fields: a step is found by its workflow (and the
# workflow's key makes the insert idempotent), not by a key of its own.
_REFUSED = ("unique_key", "job_key", "on_conflict", "max_wait")


@dataclass(frozen=True, eq=False)
class Step:
    """One step of a ``Workflow``, as ``Workflow.add`` returns it: pass it in ``after=``."""

    workflow: Workflow = field(repr=False)
    name: str
    job: NewJob = field(repr=False)
    after: tuple[Step, ...] = field(repr=False)
    on_parent_failure: OnParentFailure = "cancel"


class Workflow:
    """Jobs that wait for other jobs: build with ``add``, insert with ``pgbeat.enqueue_workflow``.

    ``after=`` names the steps a step waits for; it starts only once each of them ended
    ``done``. A parent that ends ``failed`` or ``cancelled`` cancels its dependants
    (transitively), or lets them run with ``on_parent_failure="run"``.
    """

    def __init__(self, name: str | None = None) -> None:
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError("a workflow's name must be a non-empty string or None")
        self.name = name
        self.steps: list[Step] = []
        self._by_name: dict[str, Step] = {}

    def __repr__(self) -> str:
        return f"Workflow(name={self.name!r}, steps={len(self.steps)})"

    def add(
        self,
        kind: str,
        payload: Any = None,
        *,
        after: Step | str | Iterable[Step | str] = (),
        name: str | None = None,
        on_parent_failure: OnParentFailure = "cancel",
        **job_fields: Any,
    ) -> Step:
        """Add a step running a job of ``kind``; return it, for other steps' ``after=``.

        ``job_fields`` are ``enqueue``'s (queue, priority, limit_key, max_attempts, run_at or
        delay, ...); a step with parents counts its ``delay`` from their end. ``name``
        defaults to ``kind``, then ``kind_2``, ``kind_3``... when the kind repeats.
        """
        if not isinstance(kind, str) or not kind:
            raise ValueError("a step's kind must be a non-empty string")
        refused = sorted(set(job_fields) & set(_REFUSED))
        if refused:
            raise ValueError(
                f"a workflow step takes no {', '.join(refused)}: give the workflow a key "
                "(enqueue_workflow(conn, flow, key=...)) to insert it once"
            )
        if on_parent_failure not in ON_PARENT_FAILURE:
            raise ValueError(
                f"on_parent_failure must be 'cancel' or 'run', not {on_parent_failure!r}"
            )
        try:
            job = NewJob(kind, payload, **job_fields)
        except TypeError:
            unknown = sorted(set(job_fields) - set(NewJob.__dataclass_fields__))
            raise TypeError(
                f"Workflow.add() got unknown job fields: {', '.join(unknown)}"
            ) from None
        step = Step(self, self._step_name(kind, name), job, self._parents(after), on_parent_failure)
        self.steps.append(step)
        self._by_name[step.name] = step
        return step

    def _step_name(self, kind: str, name: str | None) -> str:
        if name is not None:
            if not isinstance(name, str) or not name:
                raise ValueError("a step's name must be a non-empty string")
            if name in self._by_name:
                raise ValueError(f"this workflow already has a step named {name!r}")
            return name
        if kind not in self._by_name:
            return kind
        number = 2
        while f"{kind}_{number}" in self._by_name:
            number += 1
        return f"{kind}_{number}"

    def _parents(self, after: Step | str | Iterable[Step | str]) -> tuple[Step, ...]:
        given = [after] if isinstance(after, Step | str) else list(after)
        parents: list[Step] = []
        for parent in given:
            if isinstance(parent, str):
                found = self._by_name.get(parent)
                if found is None:
                    raise ValueError(
                        f"unknown parent step {parent!r}: add it before its dependants"
                    )
                parent = found
            if not isinstance(parent, Step):
                raise ValueError(
                    f"after= takes steps returned by this workflow's add(), not {parent!r}"
                )
            if parent.workflow is not self:
                raise ValueError(
                    f"step {parent.name!r} belongs to another workflow: after= takes steps of "
                    "this one"
                )
            if self._by_name.get(parent.name) is not parent:
                raise ValueError(f"unknown parent step {parent.name!r}")
            if parent not in parents:
                parents.append(parent)
        return tuple(parents)


def insert_params(flow: Workflow) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The jobs', steps' and edges' parameters of ``flow`` (every check before any SQL);
    the ids are filled in once the jobs are inserted."""
    if not isinstance(flow, Workflow):
        raise TypeError(f"enqueue_workflow takes a pgbeat.Workflow, not {type(flow).__name__}")
    if not flow.steps:
        raise ValueError("this workflow has no steps: add at least one before enqueueing it")
    jobs, keyed = rows.many_params(step.job for step in flow.steps)
    assert not keyed  # add() refused the keyed fields
    jobs["held"] = bool_array(bool(step.after) for step in flow.steps)
    steps = {
        "names": text_array([step.name for step in flow.steps]),
        "waiting_for": number_array(str(len(step.after)) for step in flow.steps),
        "on_parent_failure": text_array([step.on_parent_failure for step in flow.steps]),
        "run_ats": jobs["run_ats"],
        "delay_seconds": number_array(_seconds(step.job.delay) for step in flow.steps),
    }
    index = {step: i for i, step in enumerate(flow.steps)}
    edges = {
        "parents": [index[parent] for step in flow.steps for parent in step.after],
        "children": [index[step] for step in flow.steps for _ in step.after],
        "sole": [_sole(step) for step in flow.steps for _ in step.after],
    }
    return jobs, steps, edges


def _sole(step: Step) -> bool:
    """Whether ``step`` waits for one parent and asked no run time: its edge says so, and
    the advance releases it when that parent ends done without reading its step row
    (migrations/0031_workflow_lookups.sql)."""
    delay = step.job.delay
    return len(step.after) == 1 and step.job.run_at is None and (delay is None or not delay)


def _seconds(delay: timedelta | None) -> str:
    return "0" if delay is None else repr(delay.total_seconds())
