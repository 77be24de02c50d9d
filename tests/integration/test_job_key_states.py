"""A stateful property test of jobs by key: Hypothesis mixes every call (enqueue in each
mode, enqueue_many, cancel, reschedule, find, retry by an operator) with claims,
completions, retries, failures, releases and reaps, and after every step the database must
match a model of the rules: at most one live job per key, always; a superseded job never
pending; each job where the rules say it is.

``PGBEAT_KEY_STATES_EXAMPLES=500 pytest tests/integration/test_job_key_states.py`` runs the
long version.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import pgbeat
from pgbeat.errors import Refused
from pgbeat.job import Job
from pgbeat.jobs import actions
from pgbeat.jobs.keys import OnConflict
from pgbeat.worker import operations

KIND = "remind"
KEYS = st.sampled_from(["a", "b", "c"])
MODES: st.SearchStrategy[OnConflict] = st.sampled_from(
    ["ignore", "replace", "keep_earliest", "keep_latest"]
)
LEASE = timedelta(minutes=5)
BUDGET = 2  # max_attempts of every job: failures and spent attempts come quickly
EXAMPLES = int(os.environ.get("PGBEAT_KEY_STATES_EXAMPLES", "40"))


@dataclass
class Expected:
    """What the rules say one job row holds."""

    key: str
    status: str
    attempts: int
    max_attempts: int
    superseded: bool
    value: int  # the payload is {"v": value}
    stop: bool = False  # cancelled while running: whatever the run does, it ends cancelled


class JobKeyMachine(RuleBasedStateMachine):
    conn: ClassVar[psycopg.Connection[Any]]

    def __init__(self) -> None:
        super().__init__()
        self.conn.execute("DELETE FROM jobs")
        self.jobs: dict[int, Expected] = {}
        self.runs: list[Job] = []  # claimed runs not yet ended, some reaped meanwhile
        self.counter = 0

    def live(self, key: str) -> int | None:
        found = [
            job_id
            for job_id, job in self.jobs.items()
            if job.key == key and job.status in ("pending", "running") and not job.superseded
        ]
        assert len(found) <= 1
        return found[0] if found else None

    def live_or_none(self, key: str, answer: object) -> int | None:
        """The key's live job; where there is none, the answer about the key must be None."""
        live = self.live(key)
        if live is None:
            assert answer is None
        return live

    def next_value(self) -> int:
        self.counter += 1
        return self.counter

    # -- the application's calls --------------------------------------------------------

    def expect_enqueue(self, key: str, mode: OnConflict, value: int, result: int | None) -> None:
        live = self.live(key)
        if live is None:
            assert isinstance(result, int) and result not in self.jobs
            self.jobs[result] = Expected(key, "pending", 0, BUDGET, False, value)
        elif mode == "ignore":
            assert result is None
        elif self.jobs[live].status == "pending":
            assert result == live
            job = self.jobs[live]
            job.value = value
            job.attempts += 1 if job.attempts else 0
            job.max_attempts = job.attempts + BUDGET
        else:  # running: superseded, and the new values go to a new job
            assert isinstance(result, int) and result not in self.jobs
            self.jobs[live].superseded = True
            self.jobs[result] = Expected(key, "pending", 0, BUDGET, False, value)

    @rule(key=KEYS, mode=MODES)
    def enqueue(self, key: str, mode: OnConflict) -> None:
        value = self.next_value()
        result = pgbeat.enqueue(
            self.conn, KIND, {"v": value}, job_key=key, on_conflict=mode, max_attempts=BUDGET
        )
        self.expect_enqueue(key, mode, value, result)

    @rule(batch=st.lists(st.tuples(KEYS, MODES), min_size=1, max_size=5))
    def enqueue_many(self, batch: list[tuple[str, OnConflict]]) -> None:
        values = [self.next_value() for _ in batch]
        jobs = [
            pgbeat.NewJob(KIND, {"v": v}, job_key=key, on_conflict=mode, max_attempts=BUDGET)
            for (key, mode), v in zip(batch, values, strict=True)
        ]
        ids = pgbeat.enqueue_many(self.conn, jobs)
        assert len(set(ids)) == len(ids)
        inserted = dict(
            self.conn.execute(
                "SELECT job_key, id FROM jobs WHERE id = ANY(%s)",
                ([i for i in ids if i not in self.jobs],),
            ).fetchall()
        )
        last = {key: (mode, value) for (key, mode), value in zip(batch, values, strict=True)}
        for key, (mode, value) in sorted(last.items()):  # a repeated key: the last wins
            live = self.live(key)
            result = inserted.get(key, live if live in ids else None)
            self.expect_enqueue(key, mode, value, result)
        assert set(ids) <= set(self.jobs)

    @rule(key=KEYS)
    def cancel(self, key: str) -> None:
        result = pgbeat.cancel(self.conn, KIND, key)
        if (live := self.live_or_none(key, result)) is not None:
            job = self.jobs[live]
            assert result == pgbeat.Cancelled(live, was_running=job.status == "running")
            if job.status == "pending":
                job.status = "cancelled"
            else:
                job.superseded = job.stop = True

    @rule(key=KEYS)
    def reschedule(self, key: str) -> None:
        result = pgbeat.reschedule(self.conn, KIND, key, delay=timedelta(0))
        live = self.live(key)
        pending = live is not None and self.jobs[live].status == "pending"
        assert result == (live if pending else None)

    @rule(key=KEYS)
    def find(self, key: str) -> None:
        found = pgbeat.find(self.conn, KIND, key)
        if (live := self.live_or_none(key, found)) is None:
            return
        job = self.jobs[live]
        assert found is not None
        assert (found.id, found.status, found.payload, found.attempts, found.max_attempts) == (
            live,
            job.status,
            {"v": job.value},
            job.attempts,
            job.max_attempts,
        )

    # -- workers -------------------------------------------------------------------------

    @rule(limit=st.integers(1, 3))
    def claim(self, limit: int) -> None:
        pending = [i for i, job in self.jobs.items() if job.status == "pending"]
        claimed = operations.claim_jobs(self.conn, limit, LEASE, None)
        assert len(claimed) == min(limit, len(pending))  # every pending job here is due
        for run in claimed:
            job = self.jobs[run.id]
            assert job.status == "pending" and not job.superseded
            assert (run.payload, run.attempt) == ({"v": job.value}, job.attempts + 1)
            job.status, job.attempts = "running", run.attempt
            self.runs.append(run)

    @precondition(lambda self: self.runs)
    @rule(pick=st.integers(0, 100), how=st.sampled_from(["complete", "retry", "fail", "release"]))
    def end_run(self, pick: int, how: str) -> None:
        run = self.runs.pop(pick % len(self.runs))
        job = self.jobs[run.id]
        fenced_in = job.attempts == run.attempt and job.status in ("running", "pending")
        if how == "complete":
            operations.complete_jobs(self.conn, [run])
            if fenced_in:
                job.status = "cancelled" if job.stop else "done"
        elif how == "fail":
            operations.fail_jobs(self.conn, [(run, "boom")])
            if fenced_in:
                job.status = "cancelled" if job.stop else "failed"
        elif how == "retry":
            operations.retry_jobs(self.conn, [(run, "boom", timedelta(0))])
            if fenced_in:
                job.status = "cancelled" if job.superseded else "pending"
        else:
            operations.release_jobs(self.conn, [run])
            if fenced_in and job.status == "running":
                job.status = "cancelled" if job.superseded else "pending"
                job.attempts = max(job.attempts - 1, 0)

    @precondition(lambda self: self.runs)
    @rule(pick=st.integers(0, 100))
    def lease_expires(self, pick: int) -> None:
        """The run's worker died: its lease passes and the reaper takes the job back."""
        run = self.runs[pick % len(self.runs)]  # the run may still end later, fenced out
        self.conn.execute(
            "UPDATE jobs SET locked_until = now() - interval '1 second' "
            "WHERE id = %s AND status = 'running'",
            (run.id,),
        )
        reaped = operations.reap_expired(self.conn)
        job = self.jobs[run.id]
        if job.status != "running":
            assert reaped == []
            return
        if job.superseded:
            job.status = "cancelled"
        elif job.attempts >= job.max_attempts:
            job.status = "failed"
        else:
            job.status = "pending"
        assert reaped == [(run.id, KIND, job.status)]

    # -- the operator ----------------------------------------------------------------------

    @rule()
    def retry_failed(self) -> None:
        result = actions.retry_failed(self.conn, None)
        failed = sorted(i for i, job in self.jobs.items() if job.status == "failed")
        newest = {self.jobs[i].key: i for i in failed}  # ids ascend: the last is the newest
        revived = sorted(i for key, i in newest.items() if self.live(key) is None)
        assert sorted(result.ids) == revived
        assert result.kept == len(failed) - len(revived)
        for job_id in revived:
            self.revive(job_id)

    @rule(pick=st.integers(0, 100))
    def retry_one(self, pick: int) -> None:
        ended = sorted(i for i, j in self.jobs.items() if j.status not in ("pending", "running"))
        if not ended:
            return
        job_id = ended[pick % len(ended)]
        allowed = self.live(self.jobs[job_id].key) is None
        try:
            actions.retry_job(self.conn, job_id)
        except Refused:
            assert not allowed
            return
        assert allowed
        self.revive(job_id)

    def revive(self, job_id: int) -> None:
        job = self.jobs[job_id]
        job.status, job.attempts, job.superseded, job.stop = "pending", 0, False, False

    # -- after every step ----------------------------------------------------------------------

    @invariant()
    def database_matches_the_rules(self) -> None:
        rows = self.conn.execute(
            "SELECT id, job_key, status, attempts, max_attempts, superseded_at IS NOT NULL, "
            "(payload->>'v')::int, cancel_requested_at IS NOT NULL FROM jobs"
        ).fetchall()
        actual = {row[0]: Expected(*row[1:]) for row in rows}
        assert actual == self.jobs

    @invariant()
    def at_most_one_live_job_per_key(self) -> None:
        # A guard, not evidence: the index jobs_live_key makes this impossible to fail
        # (test_job_key_races shows the index refusing a second live job).
        doubled = self.conn.execute(
            "SELECT job_key FROM jobs WHERE status IN ('pending', 'running') "
            "AND superseded_at IS NULL GROUP BY job_key HAVING count(*) > 1"
        ).fetchall()
        assert doubled == []
        revived = self.conn.execute(
            "SELECT id FROM jobs WHERE superseded_at IS NOT NULL AND status = 'pending'"
        ).fetchall()
        assert revived == []


@pytest.mark.slow
def test_jobs_by_key_follow_the_rules(conn: psycopg.Connection[Any]) -> None:
    JobKeyMachine.conn = conn
    run_state_machine_as_test(
        JobKeyMachine,
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
