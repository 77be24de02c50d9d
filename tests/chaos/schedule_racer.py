"""Schedules changed while scheduler replicas die: pauses, resumes, upserts, deletes, runs
now, backfills and SIGHUP reloads racing the storm (scenarios.scheduler_storm), beside
schedules whose overlap policies (buffer_one, cancel_other) and pause after failures the
claim decides, and the audit of the history against the jobs table afterwards.

Every change is made the way users make it (``pgbeat.scheduling.state`` and
``pgbeat.upsert_schedule`` on an autocommit connection, a new file and SIGHUP); the racer
notes the database's own times of each pause and deletion, which explain the periods
that must not have a job.
"""

from __future__ import annotations

import os
import random
import signal
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pgbeat
from pgbeat.errors import ScheduleNotFound
from pgbeat.scheduling import state
from pgbeat.scheduling.schedule import Schedule
from tests.chaos.harness import Conn, Fleet, ScenarioResult, connect, period_of

PAUSABLE = ("tick7", "new_york", "api_tick", "api_churn")  # never "tick": the run's pulse
API_SCHEDULES: dict[str, dict[str, Any]] = {
    "api_tick": {"every": "1s", "catch_up": "all", "catch_up_window": "1m"},
    "api_churn": {"every": "2s", "catch_up": "all", "catch_up_window": "10m"},
    "api_buffer": {"every": "1s", "catch_up": "all", "catch_up_window": "1m",
                   "overlap": "buffer_one"},
    "api_cancel": {"every": "1s", "catch_up": "all", "catch_up_window": "1m",
                   "overlap": "cancel_other"},
    "api_failing": {"every": "1s", "catch_up": "all", "catch_up_window": "1m",
                    "pause_after_failures": 2},
}  # fmt: skip
# Schedules whose missing periods the claim's own rules explain (overlap, failures): the
# racer plays their workers, ending or starting their jobs.
POLICY = ("api_buffer", "api_cancel", "api_failing")
BACKFILLED = "tick"  # the pulse, backfilled over a past half minute: adds nothing new
# A tick whose snapshot came just before a pause committed may enqueue a period that fired
# between the pause's start (its now()) and its commit: a few milliseconds at most.
COMMIT_SLACK = timedelta(milliseconds=100)
# A schedule deleted during an outage of every replica loses the periods the outage held
# back; deletions explain the periods this long before them.
DELETE_SLACK = timedelta(seconds=10)


def api_schedules() -> list[Schedule]:
    """The schedules the racer creates from code, as the audit needs them."""
    return [
        Schedule.model_validate({"name": name, "kind": name, **values})
        for name, values in API_SCHEDULES.items()
    ]


@dataclass
class Gap:
    """A span (after, until] in which a schedule must have no job: paused, or deleted."""

    schedule: str
    why: str
    after: datetime
    until: datetime | None = None  # None: until the end of the run


@dataclass
class ScheduleRacer:
    """A thread changing schedules every ``every`` seconds until ``stop``."""

    url: str
    path: Path
    versions: tuple[str, str]  # two schedules files, same timings, different payloads
    fleet: Fleet
    rng: random.Random
    every: tuple[float, float] = (0.1, 0.5)
    gaps: list[Gap] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    manual: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _version: int = 0

    def start(self) -> None:
        with connect(self.url) as conn:
            for name, values in API_SCHEDULES.items():
                pgbeat.upsert_schedule(conn, name, **values)
        self._thread = threading.Thread(target=self._run, name="schedule-racer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop racing, and leave every schedule live and running."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        with connect(self.url) as conn:
            if not _exists(conn, "api_tick"):
                self._recreate(conn)
            for name in PAUSABLE:
                self._resume(conn, name)

    def _run(self) -> None:
        moves = (self._pause, self._resume, self._upsert, self._delete, self._run_now)
        with connect(self.url) as conn:
            while not self._stop.wait(self.rng.uniform(*self.every)):
                if self.rng.random() < 0.15:
                    self._reload(conn)
                    continue
                if self.rng.random() < 0.3:
                    self._work(conn)
                    continue
                if self.rng.random() < 0.05:
                    self._backfill(conn)
                    continue
                move = self.rng.choice(moves)
                move(conn, self.rng.choice(PAUSABLE))

    def _work(self, conn: Conn) -> None:
        """Play the workers of the policy schedules: end a buffered schedule's live job, start
        a cancel_other job, fail the failing schedule's jobs, resume it once it paused."""
        name = self.rng.choice(POLICY)
        if name == "api_buffer":
            _set_live(conn, name, "done")
            self._count("buffer_done")
        elif name == "api_cancel":
            _set_live(conn, name, "running", only="pending")
            self._count("cancel_started")
        else:
            _set_live(conn, name, "failed")
            self._count("failures")
            if self.rng.random() < 0.3 and state.resume_schedule(conn, name, by="chaos"):
                self._count("resume_after_failures")

    def _backfill(self, conn: Conn) -> None:
        now = _now(conn)
        start = now - timedelta(seconds=self.rng.uniform(20, 40))
        try:
            added = state.backfill(conn, BACKFILLED, start, now - timedelta(seconds=10), by="chaos")
        except ScheduleNotFound:  # the file's schedule is not in the table before a sync
            self._count("backfill_before_sync")
            return
        self._count("backfill")
        self.counts["backfilled_periods"] = self.counts.get("backfilled_periods", 0) + added

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _pause(self, conn: Conn, name: str) -> None:
        try:
            if state.pause_schedule(conn, name, by="chaos"):
                self.gaps.append(Gap(name, "paused", _column(conn, name, "paused_at")))
                self._count("pause")
        except ScheduleNotFound:
            pass

    def _resume(self, conn: Conn, name: str) -> None:
        try:
            if state.resume_schedule(conn, name, by="chaos"):
                self._open_gap(name, "paused").until = _column(conn, name, "resumed_at")
                self._count("resume")
        except ScheduleNotFound:
            pass

    def _upsert(self, conn: Conn, name: str) -> None:
        if name in API_SCHEDULES and _exists(conn, name):
            payload = {"n": self.rng.randrange(1000)}
            pgbeat.upsert_schedule(conn, name, payload=payload, **API_SCHEDULES[name])
            self._count("upsert")

    def _delete(self, conn: Conn, name: str) -> None:
        if name != "api_tick":
            return
        if _exists(conn, name):
            pgbeat.delete_schedule(conn, name)
            deleted = _column(conn, name, "deleted_at")
            # a deletion ends a pause: the schedule created again later runs unpaused
            for gap in self.gaps:
                if gap.schedule == name and gap.why == "paused" and gap.until is None:
                    gap.until = deleted
            self.gaps.append(Gap(name, "deleted", deleted - DELETE_SLACK))
            self._count("delete")
        else:
            self._recreate(conn)

    def _recreate(self, conn: Conn) -> None:
        pgbeat.upsert_schedule(conn, "api_tick", **API_SCHEDULES["api_tick"])
        self._open_gap("api_tick", "deleted").until = _column(conn, "api_tick", "created_at")
        self._count("recreate")

    def _open_gap(self, name: str, why: str) -> Gap:
        """The pause or deletion of ``name`` that has not ended yet."""
        return next(
            g
            for g in reversed(self.gaps)
            if g.schedule == name and g.why == why and g.until is None
        )

    def _run_now(self, conn: Conn, name: str) -> None:
        try:
            self.manual.append(state.run_schedule_now(conn, name, by="chaos"))
            self._count("run_now")
        except ScheduleNotFound:
            pass

    def _reload(self, conn: Conn) -> None:
        """A new file, and SIGHUP to a few replicas that run their loop (a process still
        starting has no handler yet: SIGHUP would end it, as it ends any daemon then)."""
        self._version = 1 - self._version
        # Atomically, as a deploy writes it: a replica reading a half-written file would
        # sync a file without its schedules and delete them (then bring them back).
        written = self.path.with_suffix(".new")
        written.write_text(self.versions[self._version])
        os.replace(written, self.path)
        running = {row[0] for row in conn.execute("SELECT pid FROM pgbeat_processes")}
        live = [replica for replica in self.fleet.alive() if replica.pid in running]
        for replica in self.rng.sample(live, min(len(live), self.rng.randint(1, 3))):
            replica.send_signal(signal.SIGHUP)
            self._count("sighup")


def _set_live(conn: Conn, name: str, status: str, only: str | None = None) -> None:
    """The live jobs of ``name`` (or those in ``only``) get ``status``, as a worker would."""
    statuses = [only] if only else ["pending", "running"]
    conn.execute(
        "UPDATE jobs SET status = %s,"
        " finished_at = CASE WHEN %s IN ('done', 'failed') THEN now() END"
        " WHERE split_part(unique_key, '@', 1) = %s AND status = ANY(%s)",
        (status, status, name, statuses),
    )


def _now(conn: Conn) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    return now


def _exists(conn: Conn, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pgbeat_schedules WHERE name = %s AND deleted_at IS NULL", (name,)
    ).fetchone()
    return row is not None


def _column(conn: Conn, name: str, column: str) -> datetime:
    row = conn.execute(
        "SELECT paused_at, resumed_at, deleted_at, created_at FROM pgbeat_schedules"
        " WHERE name = %s",
        (name,),
    ).fetchone()
    assert row is not None
    value = dict(zip(("paused_at", "resumed_at", "deleted_at", "created_at"), row, strict=True))
    found: datetime = value[column]
    return found


# -- the audit -----------------------------------------------------------------------------

# Period jobs without their history row, or whose row names another job.
JOBS_WITHOUT_HISTORY = """
SELECT j.id, j.unique_key FROM jobs AS j
LEFT JOIN pgbeat_schedule_history AS h
  ON h.schedule = split_part(j.unique_key, '@', 1)
 AND h.fire_at = split_part(j.unique_key, '@', 2)::timestamptz
 AND h.outcome IN ('enqueued', 'backfill') AND h.job_id = j.id
WHERE j.unique_key NOT LIKE '%%@manual:%%' AND h.id IS NULL
LIMIT 20"""

# History rows that contradict the jobs table: an enqueued (or backfilled) period whose job is
# not its own, a skipped or missed period that has a job, a buffered (waiting) one whose job
# exists already, a manual run without its job.
HISTORY_WITHOUT_JOBS = """
WITH h AS (
    SELECT schedule, fire_at, outcome, job_id,
           schedule || '@' || to_char(fire_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
               AS period_key
    FROM pgbeat_schedule_history
)
SELECT h.schedule, h.fire_at, h.outcome, h.job_id, j.unique_key FROM h
LEFT JOIN jobs AS j ON j.id = h.job_id
WHERE (h.outcome IN ('enqueued', 'backfill')
       AND (j.id IS NULL OR j.unique_key <> h.period_key))
   OR (h.outcome IN ('skipped', 'missed') AND (h.job_id IS NOT NULL
       OR EXISTS (SELECT FROM jobs AS x WHERE x.unique_key = h.period_key)))
   OR (h.outcome = 'buffered'
       AND EXISTS (SELECT FROM jobs AS x WHERE x.unique_key = h.period_key))
   OR (h.outcome = 'manual' AND (j.id IS NULL OR j.unique_key <> h.schedule || '@manual:' || j.id))
LIMIT 20"""


def check_history(result: ScenarioResult, conn: Conn, racer: ScheduleRacer) -> None:
    """The history and the jobs table tell one story, period by period."""
    orphans = conn.execute(JOBS_WITHOUT_HISTORY).fetchall()
    result.check(not orphans, f"period jobs without their history row: {orphans}")
    wrong = conn.execute(HISTORY_WITHOUT_JOBS).fetchall()
    result.check(not wrong, f"history rows the jobs table contradicts: {wrong}")
    manual = conn.execute(
        "SELECT count(*) FROM pgbeat_schedule_history"
        " WHERE outcome = 'manual' AND job_id = ANY(%s)",
        (racer.manual,),
    ).fetchone()
    result.check(manual == (len(racer.manual),), f"manual runs recorded {manual} of {racer.manual}")
    # every schedule is live and running after stop(): a gap still open is the racer's error
    # (it would explain every later missing period and condemn every later job)
    left_open = [(g.schedule, g.why, g.after) for g in racer.gaps if g.until is None]
    result.check(not left_open, f"pauses or deletions the racer never saw end: {left_open}")
    counts = dict(
        conn.execute("SELECT outcome, count(*) FROM pgbeat_schedule_history GROUP BY 1").fetchall()
    )
    result.figures["history"] = counts
    result.figures["racer"] = dict(racer.counts)


def check_gaps(
    result: ScenarioResult, conn: Conn, schedule: Schedule, missing: list[datetime], gaps: list[Gap]
) -> None:
    """Missing periods are explained (history, pause, deletion); paused ones have no job."""
    own = [g for g in gaps if g.schedule == schedule.name]
    decided = {
        row[0]
        for row in conn.execute(
            "SELECT fire_at FROM pgbeat_schedule_history WHERE schedule = %s"
            " AND outcome IN ('skipped', 'missed', 'buffered')",
            (schedule.name,),
        )
    }
    unexplained = [
        fire for fire in missing if fire not in decided and not any(_inside(fire, g) for g in own)
    ]
    # "deleted_before": in the DELETE_SLACK before a deletion, not inside it: explained only
    # when the pulse's period of that second was decided after the deletion (no replica
    # was up from the fire time to the deletion)
    why = {"history": 0, "paused": 0, "deleted": 0, "deleted_before": 0}
    before: list[tuple[datetime, datetime]] = []  # (fire, deleted_at)
    for fire in missing:
        gap = next((g for g in own if _inside(fire, g)), None)
        if fire in decided:
            why["history"] += 1
        elif gap is not None and gap.why == "deleted" and fire <= gap.after + DELETE_SLACK:
            why["deleted_before"] += 1
            before.append((fire, gap.after + DELETE_SLACK))
        elif gap is not None:
            why[gap.why] += 1
    result.figures.setdefault("missing_explained", {})[schedule.name] = why
    pulse = dict(
        conn.execute(
            "SELECT fire_at, inserted_at FROM pgbeat_schedule_history"
            " WHERE schedule = 'tick' AND outcome <> 'manual' AND fire_at = ANY(%s)",
            ([fire for fire, _ in before],),
        ).fetchall()
    )
    up = [
        (fire, pulse.get(fire), deleted)
        for fire, deleted in before
        if pulse.get(fire) is None or pulse[fire] < deleted
    ]
    result.check(not up, f"{schedule.name}: missing before its deletion, replicas up: {up[:5]}")
    result.check(
        not unexplained,
        f"{schedule.name}: periods missing, neither paused nor skipped: {unexplained[:10]}",
    )
    keys = conn.execute(
        "SELECT unique_key FROM jobs WHERE kind = %s AND unique_key LIKE %s"
        " AND unique_key NOT LIKE '%%@manual:%%'",
        (schedule.kind, schedule.name + "@%"),
    )
    fires = [period_of(row[0]) for row in keys]
    # the periods strictly inside a pause or a deletion, whose claims saw it committed
    strict = [Gap(g.schedule, g.why, g.after + COMMIT_SLACK + _slack(g), g.until) for g in own]
    during = [fire for fire in fires if any(_inside(fire, g) for g in strict)]
    result.check(
        not during,
        f"{schedule.name}: jobs of {len(during)} paused or deleted periods: {during[:10]}",
    )


def _slack(gap: Gap) -> timedelta:
    return DELETE_SLACK if gap.why == "deleted" else timedelta(0)


def _inside(fire: datetime, gap: Gap) -> bool:
    return fire > gap.after and (gap.until is None or fire <= gap.until)
